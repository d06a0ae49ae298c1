"""The web console: every broker serves it on its admin port at ``/console/``.

The pages are committed static files (:mod:`.assets`: plain ES modules, CSS
and the vendored uPlot chart library, no build step); they read the admin API
(``/admin/v2``) and the few JSON endpoints here that the API lacks
(``/console/api``, :mod:`.api`): a cluster-wide overview, topic listings with
figures, server-side search, sort and paging, a topic's detail and its
messages. Those about one topic are answered by the topic's owner: another
broker forwards them (:mod:`.forward`). Authentication and authorization are
the admin API's (:mod:`magnetar.admin.access`): the assets are open, every
``/console/api`` call needs a role, and each answer covers only what that
role may read. See docs/console.md.
"""
