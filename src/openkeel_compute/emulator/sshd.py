"""The emulated guest's SSH server: what a client reaches on port 22 of a running guest's address.

A real guest on a reachable network answers SSH once it has booted; tools that log in to check a server
(Tempest's validation, an operator's ``ssh ubuntu@<address>``) need that. The built-in cluster has no
dataplane, so its guests' addresses (the static ones of their cloud-init network data, the pod network's) are
reachable only where this machine has them: a loopback network (127.0.0.0/8, e.g. a Neutron subnet
``127.100.0.0/24`` without DHCP) or an address an operator added to an interface. For each such IPv4 address
of a VMI that runs (not paused), ``GuestSSH`` listens on the address's port 22 (``[controller]
emulator_guest_ssh_port``) and serves SSH as Ubuntu 24.04's OpenSSH with cloud-init's settings:

- host key: ECDSA, made at the disk's first boot and kept on it (``/etc/ssh/ssh_host_ecdsa_key``): a
  rebuild (a new disk) changes it, a reboot does not;
- authentication by public key only (``PasswordAuthentication no``): the keys KubeVirt propagates from the
  VMI's ``accessCredentials`` (``sshPublicKey`` from a Secret) are the default user ``ubuntu``'s; ``root`` with
  one of them is let in to cloud-init's forced command (``Please login as the user "ubuntu" rather than the
  user "root".``, exit status 142); any other user or key is refused;
- ``exec`` requests run in the guest's login shell (guestshell.py) over the files of its boot disk.

A guest that stops, pauses or goes away closes its port and the sessions on it. An address that cannot be
listened on (not on this machine, port 22 without the privilege to bind it, taken by another program) is
left alone: the guest is then as unreachable as on a network this machine is not on.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import ipaddress
import logging
import pathlib
import socket
import threading
import time
from typing import Any

import paramiko

from openkeel_compute.emulator import guest
from openkeel_compute.emulator.guestshell import Disk, Shell, remove_disk
from openkeel_compute.emulator.store import Store

LOG = logging.getLogger(__name__)
DEFAULT_USER = "ubuntu"
ROOT_REFUSAL = 'Please login as the user "ubuntu" rather than the user "root".\n\n'
ROOT_STATUS = 142
HOST_KEY = "/etc/ssh/ssh_host_ecdsa_key"
SERVER_VERSION = "OpenSSH_9.6p1 Ubuntu-3ubuntu13.5"
SYNC_EVERY = 0.5  # seconds between two looks at the running guests
SWEEP_EVERY = 30.0  # seconds between two sweeps of the disks that are gone


@dataclasses.dataclass(frozen=True)
class Guest:
    """What serving one running VMI needs (read from the store once per look)."""

    namespace: str | None
    name: str
    uid: str
    hostname: str
    disk_id: str  # the boot disk's claim uid (the VMI's uid for a disk that lives with it)


def _ipv4s(vmi: dict[str, Any], store: Store) -> frozenset[str]:
    found: set[str] = set()
    for ips in guest.configured_addresses(vmi.get("spec") or {}, vmi["metadata"].get("namespace"),
                                          store.lookup).values():
        found.update(ips)
    for iface in (vmi.get("status") or {}).get("interfaces") or ():
        found.update(iface.get("ipAddresses") or ([iface["ipAddress"]] if iface.get("ipAddress") else []))
    out = set()
    for ip in found:
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(ip).version == 4:
                out.add(ip)
    return frozenset(out)


def _running(vmi: dict[str, Any]) -> bool:
    status = vmi.get("status") or {}
    paused = any(c.get("type") == "Paused" and c.get("status") == "True" for c in status.get("conditions") or ())
    return status.get("phase") == "Running" and not paused and not vmi["metadata"].get("deletionTimestamp")


def authorized_keys(vmi: dict[str, Any], store: Store) -> set[tuple[str, str]]:
    """(type, base64) of every key KubeVirt's accessCredentials give the guest."""
    keys: set[tuple[str, str]] = set()
    ns = vmi["metadata"].get("namespace")
    for cred in (vmi.get("spec") or {}).get("accessCredentials") or ():
        source = ((cred.get("sshPublicKey") or {}).get("source") or {}).get("secret") or {}
        secret = store.lookup("Secret", source.get("secretName") or "", ns) if source.get("secretName") else None
        if not secret:
            continue
        texts = [base64.b64decode(v).decode(errors="replace") for v in (secret.get("data") or {}).values()]
        texts += list((secret.get("stringData") or {}).values())
        for text in texts:
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 2 and not line.lstrip().startswith("#"):
                    keys.add((parts[0], parts[1]))
    return keys


class _Session(paramiko.ServerInterface):
    def __init__(self, sshd: GuestSSH, guest_: Guest) -> None:
        self.sshd, self.guest = sshd, guest_
        self.user: str | None = None
        self.commands: dict[int, str] = {}
        self.ready = threading.Condition()

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if username not in (DEFAULT_USER, "root"):
            return paramiko.AUTH_FAILED
        vmi = self.sshd.vmi(self.guest)
        if vmi is None or (key.get_name(), key.get_base64()) not in authorized_keys(vmi, self.sshd.store):
            return paramiko.AUTH_FAILED
        self.user = username
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_pty_request(self, *args: Any) -> bool:
        return True

    def check_channel_env_request(self, channel: paramiko.Channel, name: bytes, value: bytes) -> bool:
        return True

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        with self.ready:
            self.commands[channel.get_id()] = command.decode(errors="replace")
            self.ready.notify_all()
        return True

    def command(self, channel: paramiko.Channel, timeout: float) -> str | None:
        with self.ready:
            self.ready.wait_for(lambda: channel.get_id() in self.commands or channel.closed, timeout)
            return self.commands.pop(channel.get_id(), None)


class _Listener:
    def __init__(self, sshd: GuestSSH, address: str, guest_: Guest, sock: socket.socket) -> None:
        self.sshd, self.address, self.guest, self.sock = sshd, address, guest_, sock
        self.transports: set[paramiko.Transport] = set()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._accept, name=f"guest-sshd-{address}", daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _peer = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name=f"guest-ssh-{self.address}", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        # the guest that has the address now: the listener's may have just gone (a restart, a rebuild)
        # without the next look having noticed yet
        current = self.sshd.guest_at(self.address)
        if current is None:
            conn.close()
            return
        transport = paramiko.Transport(conn)
        transport.local_version = f"SSH-2.0-{SERVER_VERSION}"
        self.transports.add(transport)
        try:
            transport.add_server_key(self.sshd.host_key(current))
            session = _Session(self.sshd, current)
            transport.start_server(server=session)
            while transport.is_active() and not self.closed.is_set():
                channel = transport.accept(0.5)
                if channel is not None:
                    threading.Thread(target=self._exec, args=(session, channel), daemon=True).start()
        except (paramiko.SSHException, OSError, EOFError) as exc:
            LOG.debug("guest %s/%s: SSH session on %s ended: %s", current.namespace, current.name, self.address,
                      exc)
        finally:
            self.transports.discard(transport)
            transport.close()

    def _exec(self, session: _Session, channel: paramiko.Channel) -> None:
        try:
            command = session.command(channel, 30)
            if command is None:
                return
            if session.user == "root":
                channel.sendall(ROOT_REFUSAL.encode())
                channel.send_exit_status(ROOT_STATUS)
                return
            shell = Shell(self.sshd.disk(session.guest), session.user or DEFAULT_USER, session.guest.hostname)
            result = shell.run(command)
            if result.stdout:
                channel.sendall(result.stdout.encode())
            if result.stderr:
                channel.sendall_stderr(result.stderr.encode())
            channel.send_exit_status(result.status)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            LOG.debug("guest %s: command ended: %s", session.guest.name, exc)
        finally:
            with contextlib.suppress(Exception):
                channel.shutdown_write()
                channel.close()

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for transport in list(self.transports):
            transport.close()


class GuestSSH:
    """The SSH servers of the built-in cluster's running guests (see the module's text)."""

    def __init__(self, store: Store, data_dir: pathlib.Path, port: int = 22) -> None:
        self.store, self.data_dir, self.port = store, data_dir, port
        self.listeners: dict[str, _Listener] = {}
        self.unreachable: dict[str, str] = {}  # address -> the guest (uid) it could not be listened on for
        self._last = 0.0
        self._swept = 0.0
        self._keys = threading.Lock()
        # VMI uid -> (its resourceVersion, the Guest it is while it runs or None, its IPv4 addresses): read
        # again only when the VMI changed, so that a look at a thousand guests costs a thousand comparisons
        self._seen: dict[str, tuple[str, Guest | None, frozenset[str]]] = {}

    # -- what sessions ask -----------------------------------------------------------------------------

    def guest_at(self, address: str) -> Guest | None:
        """The running guest that has ``address`` now."""
        with self.store.lock:
            for vmi in self.store.of_kind("VirtualMachineInstance"):
                found, addresses = self._look(vmi)
                if found is not None and address in addresses:
                    return found
        return None

    def _guest_of(self, vmi: dict[str, Any]) -> Guest:
        meta = vmi["metadata"]
        boot = guest.boot_disk(vmi.get("spec") or {})
        claim_name = boot[1] if boot is not None else None
        claim = self.store.lookup("PersistentVolumeClaim", claim_name, meta.get("namespace")) if claim_name else None
        disk_id = ((claim or {}).get("metadata") or {}).get("uid") or meta.get("uid")
        return Guest(meta.get("namespace"), meta["name"], meta.get("uid") or "",
                     (vmi.get("spec") or {}).get("hostname") or meta["name"], disk_id)

    def vmi(self, guest_: Guest) -> dict[str, Any] | None:
        with self.store.lock:
            vmi = self.store.lookup("VirtualMachineInstance", guest_.name, guest_.namespace)
        return vmi if vmi is not None and vmi["metadata"].get("uid") == guest_.uid else None

    def disk(self, guest_: Guest) -> Disk:
        return Disk(self.data_dir / guest_.disk_id)  # made, with a cloud image's top folders, at its first use

    def host_key(self, guest_: Guest) -> paramiko.PKey:
        path = self.disk(guest_).path(HOST_KEY)
        with self._keys:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                paramiko.ECDSAKey.generate().write_private_key_file(str(path))
            return paramiko.ECDSAKey(filename=str(path))

    # -- the controller loop's part ----------------------------------------------------------------------

    def sync(self, force: bool = False) -> None:
        """Listen on the addresses of the guests that run, stop listening on the others (at most every
        ``SYNC_EVERY`` seconds unless ``force``)."""
        clock = time.monotonic()
        if not force and clock - self._last < SYNC_EVERY:
            return
        self._last = clock
        wanted: dict[str, Guest] = {}
        sweep = clock - self._swept >= SWEEP_EVERY
        alive: set[str] = set()
        with self.store.lock:
            vmis = self.store.of_kind("VirtualMachineInstance")
            for vmi in vmis:
                found, addresses = self._look(vmi)
                if found is not None:
                    for address in addresses:
                        wanted.setdefault(address, found)
            uids = {vmi["metadata"].get("uid") or "" for vmi in vmis}
            for uid in [u for u in self._seen if u not in uids]:
                del self._seen[uid]
            if sweep:
                alive = uids | {c["metadata"].get("uid") or "" for c in self.store.of_kind("PersistentVolumeClaim")}
        for address, listener in list(self.listeners.items()):
            if wanted.get(address) != listener.guest:
                listener.close()
                del self.listeners[address]
        for address, found in wanted.items():
            if address in self.listeners or self.unreachable.get(address) == found.uid:
                continue
            sock = self._bind(address)
            if sock is None:
                self.unreachable[address] = found.uid
                continue
            self.unreachable.pop(address, None)
            self.listeners[address] = _Listener(self, address, found, sock)
            LOG.info("built-in cluster: guest %s/%s answers SSH on %s:%d", found.namespace, found.name, address,
                     self.port)
        if sweep:
            self._swept = clock
            self._sweep(alive | {g.disk_id for g in wanted.values()})

    def _look(self, vmi: dict[str, Any]) -> tuple[Guest | None, frozenset[str]]:
        """(the Guest the VMI is if it runs, else None; its IPv4 addresses), read again when it changed.
        The caller holds the store's lock."""
        meta = vmi["metadata"]
        uid, rv = meta.get("uid") or "", meta.get("resourceVersion") or ""
        kept = self._seen.get(uid)
        if kept is not None and kept[0] == rv:
            return kept[1], kept[2]
        found = self._guest_of(vmi) if _running(vmi) else None
        addresses = _ipv4s(vmi, self.store) if found is not None else frozenset()
        self._seen[uid] = (rv, found, addresses)
        return found, addresses

    def _bind(self, address: str) -> socket.socket | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, self.port))
            sock.listen(16)
            return sock
        except OSError as exc:
            LOG.debug("built-in cluster: no SSH on %s:%d (%s)", address, self.port, exc.strerror)
            sock.close()
            return None

    def _sweep(self, alive: set[str]) -> None:
        """Disks whose claim (or VMI, for a disk that lives with it) is gone go with it."""
        if not self.data_dir.is_dir():
            return
        for entry in self.data_dir.iterdir():
            if entry.name not in alive:
                remove_disk(entry)

    def close(self) -> None:
        for listener in self.listeners.values():
            listener.close()
        self.listeners.clear()
