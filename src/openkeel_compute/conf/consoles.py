"""[vnc], [serial_console] and [consoleauth]: the remote consoles the API hands out and the console proxy
(``openkeel-compute console-proxy``) serves, under Nova's option names. KubeVirt gives every virtual
machine a VNC display and a serial console; SPICE, RDP and MKS consoles do not exist on it."""

from oslo_config import cfg

from openkeel_compute.conf.groups import own

VNC = cfg.OptGroup("vnc", title="VNC consoles", help="The noVNC consoles of servers (KubeVirt's VNC subresource).")
SERIAL = cfg.OptGroup("serial_console", title="Serial consoles",
                      help="The serial consoles of servers (KubeVirt's console subresource), over a websocket.")
CONSOLEAUTH = cfg.OptGroup("consoleauth", title="Console authorisations",
                           help="The tokens of the console URLs the API hands out.")

VNC_OPTS = [
    cfg.BoolOpt("enabled", default=True,
                help="Hand out VNC console URLs (os-getVNCConsole, remote-consoles protocol vnc). As Nova's option."),
    cfg.URIOpt("novncproxy_base_url", default="http://127.0.0.1:6080/vnc_auto.html",
               help="The public URL of the console proxy's noVNC page, as browsers reach it; the API adds the "
                    "token to it (in noVNC's path parameter) as Nova does. As Nova's option."),
    cfg.HostAddressOpt("novncproxy_host", default="0.0.0.0",
                       help="Address the console proxy listens on for noVNC. As Nova's option."),
    cfg.PortOpt("novncproxy_port", default=6080, help="Port the console proxy listens on for noVNC. As Nova's option."),
    cfg.StrOpt("web", default=None,
               help="Directory of noVNC's files (vnc_auto.html, vnc.html, app/, core/) the console proxy serves. "
                    "Unset: the first of /usr/share/novnc (Debian's and Ubuntu's novnc package) and "
                    "/usr/share/webapps/novnc that holds them. Nova's [DEFAULT] web."),
]
SERIAL_OPTS = [
    cfg.BoolOpt("enabled", default=True,
                help="Hand out serial console URLs (os-getSerialConsole, remote-consoles protocol serial). Nova's "
                     "option defaults to false, as libvirt needs ports set aside for it; KubeVirt always has a "
                     "serial console."),
    cfg.URIOpt("base_url", default="ws://127.0.0.1:6083/",
               help="The public websocket URL of the console proxy's serial consoles; the API adds ?token=. As "
                    "Nova's option."),
    cfg.HostAddressOpt("serialproxy_host", default="0.0.0.0",
                       help="Address the console proxy listens on for serial consoles. As Nova's option."),
    cfg.PortOpt("serialproxy_port", default=6083,
                help="Port the console proxy listens on for serial consoles (the same port as "
                     "[vnc] novncproxy_port serves both). As Nova's option."),
]
CONSOLE = cfg.OptGroup("console", title="Console proxy", help="What the console proxy accepts from browsers.")
CONSOLE_OPTS = [
    cfg.ListOpt("allowed_origins", default=[],
                help="Host names a browser's Origin header may name beside the proxy's own host (the Host "
                     "header it was reached at); any other origin is refused. As Nova's option."),
]
CONSOLEAUTH_OPTS = [
    cfg.IntOpt("token_ttl", default=600, min=0,
               help="Seconds a console URL's token stays valid; it may be used any number of times until then "
                    "(as Nova's), and goes with its server. As Nova's option."),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    for group, opts in ((VNC, VNC_OPTS), (SERIAL, SERIAL_OPTS), (CONSOLE, CONSOLE_OPTS),
                        (CONSOLEAUTH, CONSOLEAUTH_OPTS)):
        own_group = own(group)
        conf.register_group(own_group)
        conf.register_opts(opts, group=own_group)


def list_opts():
    return [(VNC, VNC_OPTS), (SERIAL, SERIAL_OPTS), (CONSOLE, CONSOLE_OPTS), (CONSOLEAUTH, CONSOLEAUTH_OPTS)]
