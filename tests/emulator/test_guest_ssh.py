"""The built-in cluster's guests answer SSH on their addresses that this machine has (a loopback network), as an
Ubuntu cloud image does: the key of the VMI's accessCredentials for the user ubuntu, root refused by cloud-init's
forced command, commands run over the files of the boot disk, which outlive a reboot, a stop and start and a
restart of the cluster and are gone with the disk."""

from __future__ import annotations

import base64
import io
import os
import socket
import time

import paramiko
import pytest
from lightkube.generic_resource import create_namespaced_resource

from openkeel_compute.controller.kube import make_client
from openkeel_compute.emulator import Delays, Emulator
from tests.emulator.conftest import NS, VM, VM_NAME, boot, printable, put, running
from tests.emulator.test_networks import MAC, PORT1, nad, net_secret, network_data, neutron_vm

DV = create_namespaced_resource("cdi.kubevirt.io", "v1beta1", "DataVolume", "datavolumes")
PROLOGUE = "set -eu -o pipefail; PATH=$PATH:/sbin; "  # what Tempest's RemoteClient puts before each command
KEY = paramiko.ECDSAKey.generate()
OTHER_KEY = paramiko.ECDSAKey.generate()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# an address of the loopback network of its own for each worker, so that parallel tests never share one
ADDRESS = f"127.{100 + os.getpid() % 100}.{os.getpid() // 100 % 250}.10"


def key_secret(key: paramiko.PKey = KEY) -> dict:
    line = f"{key.get_name()} {key.get_base64()} Generated-by-Nova\n"
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{VM_NAME}-ssh", "namespace": NS},
            "data": {"key": base64.b64encode(line.encode()).decode()}}


def ssh_vm() -> dict:
    vm = neutron_vm()
    vm["spec"]["template"]["spec"]["accessCredentials"] = [{"sshPublicKey": {
        "source": {"secret": {"secretName": f"{VM_NAME}-ssh"}}, "propagationMethod": {"configDrive": {}}}}]
    return vm


@pytest.fixture
def port():
    return _free_port()


def _start(cluster, client, address: str = ADDRESS) -> None:
    """A server's VM on a Neutron port whose address is ``address``, with the key pair's Secret."""
    cluster.seed(net_secret(network_data((PORT1, MAC, address))))
    cluster.seed(key_secret())
    if cluster.get("NetworkAttachmentDefinition", nad()["metadata"]["name"], NS) is None:
        cluster.seed(nad())
    boot(cluster, client, start=False)
    client.delete(VM, VM_NAME, namespace=NS)
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o is None)
    client.create(VM.from_dict(ssh_vm()), namespace=NS)
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202
    running(cluster)


def _login(port: int, user: str = "ubuntu", key: paramiko.PKey | None = KEY, password: str | None = None,
           address: str = ADDRESS, wait: float = 10.0) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    deadline = time.monotonic() + wait
    while True:
        try:
            client.connect(address, port=port, username=user, pkey=key, password=password, timeout=5,
                           allow_agent=False, look_for_keys=False)
            return client
        except paramiko.AuthenticationException:
            raise
        except (paramiko.SSHException, OSError, EOFError):  # not listening yet, or a guest between two VMIs
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _run(client: paramiko.SSHClient, command: str) -> tuple[str, str, int]:
    _in, out, err = client.exec_command(PROLOGUE + command)
    status = out.channel.recv_exit_status()
    return out.read().decode(), err.read().decode(), status


def _refused(port: int, address: str = ADDRESS) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((address, port)) != 0


def _host_key(port: int) -> str:
    client = _login(port)
    try:
        return client.get_transport().get_remote_server_key().get_base64()
    finally:
        client.close()


@pytest.fixture
def ssh_cluster(port):
    emulator = Emulator(delays=Delays.fast(), tick=0.01, read_images=False, guest_ssh_port=port).start()
    emulator.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    client = make_client(emulator.kubeconfig(), timeout=5)
    yield emulator, client
    client.close()
    emulator.stop()


def test_a_running_guest_answers_ssh_for_its_key_and_keeps_its_files(ssh_cluster, port):
    cluster, client = ssh_cluster
    _start(cluster, client)
    ssh = _login(port)
    assert ssh.get_transport().remote_version.startswith("SSH-2.0-OpenSSH_9.6p1 Ubuntu")
    assert _run(ssh, "touch test_file") == ("", "", 0)  # what Tempest's rebuild test runs: no output
    assert _run(ssh, "ls; hostname; whoami; pwd") == (f"test_file\n{VM_NAME}\nubuntu\n/home/ubuntu\n", "", 0)
    assert _run(ssh, "echo kept > notes && cat notes test_file") == ("kept\n", "", 0)
    out, err, status = _run(ssh, "cat missing; echo not reached")
    assert (out, err, status) == ("", "cat: missing: No such file or directory\n", 1)  # set -e stops there
    assert _run(ssh, "frobnicate")[1:] == ("bash: line 1: frobnicate: command not found\n", 127)
    assert _run(ssh, "cat ../../../../../../etc/hostname")[2] == 1  # never above the disk's root
    assert _run(ssh, "sudo touch /root/x && sudo ls /root")[0] == "x\n"
    ssh.close()

    with pytest.raises(paramiko.AuthenticationException):  # another key
        _login(port, key=OTHER_KEY)
    with pytest.raises(paramiko.AuthenticationException):  # no password logins (PasswordAuthentication no)
        _login(port, key=None, password="rebuildPassw0rd")
    with pytest.raises(paramiko.AuthenticationException):  # a user the image does not have
        _login(port, user="cirros")
    root = _login(port, user="root")
    assert _run(root, "touch x") == ('Please login as the user "ubuntu" rather than the user "root".\n\n', "", 142)
    root.close()

    # a reboot and a stop and start keep the disk: the file, the host key
    key = _host_key(port)
    first = cluster.get("VirtualMachineInstance", VM_NAME, NS)["metadata"]["uid"]
    assert put(client, "virtualmachines", VM_NAME, "restart", {"gracePeriodSeconds": 0}).status_code == 202
    cluster.wait_for("VirtualMachineInstance", VM_NAME, NS,
                     lambda o: o is not None and o["metadata"]["uid"] != first
                     and (o.get("status") or {}).get("phase") == "Running")
    assert put(client, "virtualmachines", VM_NAME, "stop", {"gracePeriod": 0}).status_code == 202
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Stopped")
    cluster.sshd.sync(force=True)
    assert _refused(port)  # a stopped guest answers nothing
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202
    running(cluster)
    ssh = _login(port)
    assert _run(ssh, "cat notes; ls") == ("kept\nnotes\ntest_file\n", "", 0)
    assert ssh.get_transport().get_remote_server_key().get_base64() == key
    ssh.close()


def test_a_paused_guest_closes_its_port_and_opens_it_again(ssh_cluster, port):
    cluster, client = ssh_cluster
    _start(cluster, client)
    ssh = _login(port)
    assert put(client, "virtualmachineinstances", VM_NAME, "pause").status_code == 202
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: printable(o) == "Paused")
    cluster.sshd.sync(force=True)
    assert _refused(port)
    assert not ssh.get_transport().is_active() or _session_dropped(ssh)
    assert put(client, "virtualmachineinstances", VM_NAME, "unpause").status_code == 202
    running(cluster)
    assert _run(_login(port), "true") == ("", "", 0)


def _session_dropped(ssh: paramiko.SSHClient) -> bool:
    deadline = time.monotonic() + 5
    while ssh.get_transport().is_active() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not ssh.get_transport().is_active()


def test_a_new_disk_is_a_new_guest_and_the_old_disks_files_go(ssh_cluster, port):
    """A rebuild gives the server a new boot disk: what was written on the old one is not there, the host key
    is new, and the old disk's files are swept with it."""
    cluster, client = ssh_cluster
    _start(cluster, client)
    ssh = _login(port)
    assert _run(ssh, "touch test_file")[2] == 0
    ssh.close()
    key = _host_key(port)
    old_disk = cluster.get("PersistentVolumeClaim", f"{VM_NAME}-root", NS)["metadata"]["uid"]
    assert (cluster.sshd.data_dir / old_disk / "home/ubuntu/test_file").exists()

    client.delete(VM, VM_NAME, namespace=NS)
    cluster.wait_for("VirtualMachine", VM_NAME, NS, lambda o: o is None)
    cluster.wait_for("PersistentVolumeClaim", f"{VM_NAME}-root", NS, lambda o: o is None)
    client.create(VM.from_dict(ssh_vm()), namespace=NS)
    assert put(client, "virtualmachines", VM_NAME, "start").status_code == 202
    running(cluster)
    ssh = _login(port)
    _out, err, status = _run(ssh, "cat test_file")
    assert (status, err) == (1, "cat: test_file: No such file or directory\n")
    assert ssh.get_transport().get_remote_server_key().get_base64() != key
    ssh.close()
    cluster.sshd._swept = 0.0
    cluster.sshd.sync(force=True)
    assert not (cluster.sshd.data_dir / old_disk).exists()


def test_an_address_this_machine_does_not_have_is_left_alone(ssh_cluster, port):
    cluster, client = ssh_cluster
    _start(cluster, client, address="192.0.2.10")
    cluster.sshd.sync(force=True)
    assert cluster.sshd.listeners == {}
    assert cluster.sshd.unreachable == {"192.0.2.10": cluster.get("VirtualMachineInstance", VM_NAME, NS)
                                        ["metadata"]["uid"]}


def test_the_guests_files_outlive_a_restart_of_the_cluster(kept, port):
    cluster = kept(guest_ssh_port=port)
    client = make_client(cluster.kubeconfig(), timeout=5)
    cluster.seed({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    _start(cluster, client)
    assert _run(_login(port), "echo before > restart")[2] == 0
    key = _host_key(port)
    client.close()
    cluster.stop()
    assert _refused(port)

    again = kept(guest_ssh_port=port)
    ssh = _login(port)
    assert _run(ssh, "cat restart") == ("before\n", "", 0)
    assert ssh.get_transport().get_remote_server_key().get_base64() == key
    ssh.close()
    assert again.sshd is not None


def test_no_port_no_ssh(kept):
    assert kept(guest_ssh_port=None).sshd is None


def test_a_private_key_is_what_tempest_hands_paramiko():
    """Tempest gives RemoteClient the key pair's private key as text: the test's key round-trips that way."""
    text = io.StringIO()
    KEY.write_private_key(text)
    assert paramiko.ECDSAKey.from_private_key(io.StringIO(text.getvalue())).get_base64() == KEY.get_base64()
