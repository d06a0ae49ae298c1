"""The committed protobuf module matches the project's .proto."""
from magnetar.protocol import generate


def test_generated_module_is_current():
    assert generate.main(["--check"]) == 0, "magnetar_api_pb2.py is stale: run `make proto`"


def test_field_numbers_match_pulsar_for_what_clients_read():
    from magnetar.protocol import pb

    assert pb.BaseCommand.DESCRIPTOR.fields_by_name["send"].number == 6
    assert pb.MessageMetadata.DESCRIPTOR.fields_by_name["highest_sequence_id"].number == 24
    assert pb.CommandProducer.DESCRIPTOR.fields_by_name["topic_epoch"].number == 11
    assert pb.CommandProducerSuccess.DESCRIPTOR.fields_by_name["producer_ready"].number == 6
    assert pb.ServerError.Value("ProducerFenced") == 25
