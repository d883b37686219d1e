"""The console proxy (``openkeel-compute console-proxy``), OpenKeel's nova-novncproxy and nova-serialproxy in one
service: it serves noVNC's files, checks a browser's console token against the database and relays its
websocket to KubeVirt's VNC or serial console subresource of the server (docs/consoles.md)."""
