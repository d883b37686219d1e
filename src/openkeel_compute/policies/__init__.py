"""Policy through oslo.policy: Nova's rule names and defaults registered in code.

One Enforcer per process. ``authorize()`` raises ``PolicyNotAuthorized`` for a denied rule and
``PolicyNotRegistered`` for a typo, so a misspelt rule fails loudly instead of allowing.
"""

from __future__ import annotations

import itertools
import threading
import time

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy

from openkeel_compute.policies import (
    base,
    consoles,
    contract,
    extension_checks,
    flavors,
    keypairs_quotas,
    operator,
    server_actions,
    server_subresources,
    servers,
    volumes,
)

_ENFORCER: policy.Enforcer | None = None
_ENFORCER_CONF: cfg.ConfigOpts | None = None

# oslo.policy re-reads the policy file's mtime and inspects every check's signature on each
# call (hundreds of microseconds). A decision is a pure function of (rule, target, credentials)
# and the rules, so decisions are remembered, and forgotten every few seconds so that edits to
# policy.yaml still apply. Not once a rule uses an extension check (http://, https://): a remote
# server's answer is its own, asked for each time as oslo.policy asks it.
DECISION_TTL = 5.0
_decisions: dict = {}
_decisions_born = 0.0
_decisions_lock = threading.Lock()
_MAX_DECISIONS = 50000


def list_rules():
    """Every default rule (the ``oslo.policy.policies`` entry point)."""
    return list(itertools.chain(base.list_rules(), flavors.list_rules(), servers.list_rules(),
                                server_actions.list_rules(), keypairs_quotas.list_rules(),
                                server_subresources.list_rules(), contract.list_rules(),
                                operator.list_rules(), consoles.list_rules(),
                                volumes.list_rules()))


# oslo.policy 6 removed [oslo_policy] enforce_scope: scope is always enforced. Deployments and
# tools still write the option, so it stays accepted; turning it off is refused at start-up
# rather than silently ignored.
ENFORCE_SCOPE_OPT = cfg.BoolOpt(
    "enforce_scope",
    default=True,
    help="Kept for configuration compatibility: oslo.policy 6 always checks the token scope "
    "against each rule's scope_types, so this must stay true.",
)


def register_opts(conf: cfg.ConfigOpts) -> None:
    # oslo.policy owns [oslo_policy]; Nova's defaults: enforce_new_defaults on, policy.yaml.
    policy_opts.set_defaults(conf, policy_file="policy.yaml", enforce_new_defaults=True)
    conf.register_opt(ENFORCE_SCOPE_OPT, group="oslo_policy")


def list_opts():
    opts = policy_opts.list_opts()
    return [(group, list(group_opts) + ([ENFORCE_SCOPE_OPT] if group == "oslo_policy" else []))
            for group, group_opts in opts]


def get_enforcer() -> policy.Enforcer:
    """The ``oslo.policy.enforcer`` entry point (oslopolicy-policy-generator and friends)."""
    from openkeel_compute.conf import build_conf

    conf = build_conf([])
    return init(conf)


def init(conf: cfg.ConfigOpts) -> policy.Enforcer:
    """Create (or return) the process Enforcer for ``conf``, with every default registered."""
    global _ENFORCER, _ENFORCER_CONF
    if not conf.oslo_policy.enforce_scope:
        raise ValueError("[oslo_policy] enforce_scope = false is not supported: oslo.policy 6 always "
                         "enforces scope")
    if _ENFORCER is None or _ENFORCER_CONF is not conf:
        enforcer = policy.Enforcer(conf)
        enforcer.register_defaults(list_rules())
        enforcer.load_rules()
        _ENFORCER, _ENFORCER_CONF = enforcer, conf
    return _ENFORCER


def reset() -> None:
    global _ENFORCER, _ENFORCER_CONF
    _ENFORCER = _ENFORCER_CONF = None
    _decisions.clear()
    extension_checks.forget_use()  # the next enforcer parses its rules afresh


_SCALARS = frozenset({str, bool, int, float})


def _freeze(value):
    if value is None or type(value) in _SCALARS:  # most policy values: one set lookup
        return value
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple, set)):
        return tuple(_freeze(v) for v in value)
    return value


def _credentials_key(context):
    key = getattr(context, "_openkeel_policy_key", None)
    if key is None:
        key = _freeze(dict(context.to_policy_values()))
        try:
            context._openkeel_policy_key = key
        except AttributeError:  # pragma: no cover - a context class with __slots__
            pass
    return key


def authorize(context, rule: str, target: dict | None = None, *, fatal: bool = True) -> bool:
    """Check ``rule`` for ``context``; Nova's default target is the caller's own project and user."""
    enforcer = _ENFORCER
    if enforcer is None:
        raise RuntimeError("policies.init(conf) was not called")
    if target is None:
        target = {"project_id": context.project_id, "user_id": context.user_id}
    global _decisions_born
    now = time.monotonic()
    if now - _decisions_born > DECISION_TTL or len(_decisions) > _MAX_DECISIONS:
        with _decisions_lock:
            _decisions.clear()
            _decisions_born = now
    key = (rule, _freeze(target), _credentials_key(context))
    allowed = None if extension_checks.any_used() else _decisions.get(key)
    if allowed is None:
        try:
            allowed = enforcer.authorize(rule, target, context, do_raise=True)
        except (policy.PolicyNotAuthorized, policy.InvalidScope):
            allowed = False
        if not extension_checks.any_used():  # parsing the rules may just have met one
            _decisions[key] = allowed
    if not allowed and fatal:
        raise policy.PolicyNotAuthorized(rule, target, context.to_policy_values())
    return bool(allowed)
