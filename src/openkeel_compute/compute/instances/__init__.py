"""Servers' rows on a Connection, one module per concern; callers import the module they need.

- ``base``: ``Actor`` (who asks), the column namespace ``I``, result helpers;
- ``store``: create and read one server (its flavor copy, metadata, tags, status);
- ``listing``: the WHERE clause of a server list, plain lists; ``paging``: one page of a list;
- ``cas``: starting an action (the task_state compare-and-swap), delete, the controller's state saves;
- ``locks``: lock and unlock;
- ``instance_actions``: instance actions and events; ``instance_faults``: faults;
- ``deletion``: a row marked deleted; ``updates``: plain updates, the outbox, unsupported actions;
- ``instance_tags``, ``instance_metadata``, ``instance_sysmeta``: a server's children.

Every write takes the caller's transaction (``db.api.transaction``); nothing here commits.
"""
