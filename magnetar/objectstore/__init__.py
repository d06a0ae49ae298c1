"""Object storage: the seam (:mod:`.store`), the S3 implementation (:mod:`.s3`),
URL parsing and credentials (:mod:`.url`), and a local SeaweedFS server for
tests and ``magnetar cluster up`` (:mod:`.seaweed`)."""
