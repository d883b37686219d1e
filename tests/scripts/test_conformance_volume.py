"""The volume phase of scripts/conformance: its list of the tests OpenKeel cannot pass yet, and its gate."""

from __future__ import annotations

import re
import subprocess

from tests._shared import shared_path
from tests.scripts import conformance_lists
from tests.scripts.checkout import ROOT


def test_every_expected_failure_names_a_volume_test_and_why():
    assert len(conformance_lists.checked("volume")) == 2


def test_the_volume_phase_gates_and_runs_by_default():
    script = (ROOT / "scripts/conformance").read_text()
    [gate] = re.findall(r"\$\{OPENKEEL_CONFORMANCE_VOLUME_GATE:-(\d)\}", script)
    assert gate == "1"
    assert "OPENKEEL_CONFORMANCE_VOLUME_GATE   1 (default)" in script
    assert re.search(r'^PHASES="[a-z,]*\bvolume\b[a-z,]*"$', script, re.MULTILINE)  # on by default, in CI too
    assert "OPENKEEL_CONFORMANCE_VOLUME_GATE" not in (ROOT / ".ci/run").read_text()
    # every OpenKeel configuration of the run has [cinder] and sends the service token Cinder wants
    assert "$(openkeel_cinder_section)" in script and "send_service_user_token = true" in script
    # Cinder starts beside the other services and is waited for only when the phase's turn comes
    assert "[[ $VOLUME == 1 ]] && start_cinder\n" in script
    assert "run_volume_phase() {\n  local ws t0 rc=0\n  start_cinder_wait\n" in script


def test_a_failure_expected_without_neutron_gates_with_it(tmp_path):
    """A reason that starts with "without Neutron:" is taken off the expected list when the network phase ran
    (the server's port is kept across a rebuild there): the volume phase's filter, run as the script runs it."""
    script = (ROOT / "scripts/conformance").read_text()
    [body] = re.findall(r"run_volume_phase\(\) \{\n(.*?)\n\}\n", script, re.DOTALL)
    [line] = [x.strip() for x in body.splitlines() if "without Neutron:" in x and x.strip().startswith("grep")]
    # the filtered list keeps the file's name: the report names tests/conformance/tempest-volume-expected.txt
    assert re.search(r'if \[\[ \$NETWORK == 1 \]\]; then\n\s*expected=\$RUN/\$\(basename "\$VOLUME_EXPECTED"\)\n'
                     r'\s*grep', body)
    source = tmp_path / "expected.txt"
    source.write_text("# without Neutron: a comment stays\n"
                      "a | servers.A.test_a | without Neutron: the address changes\n"
                      "b | servers.B.test_b | needs a guest (without Neutron: not the start of the reason)\n")
    command = line.replace('"$VOLUME_EXPECTED"', str(source)).replace('"$expected"', str(tmp_path / "out.txt"))
    subprocess.run(["bash", "-c", command], check=True)
    kept = (tmp_path / "out.txt").read_text().splitlines()
    assert kept == ["# without Neutron: a comment stays",
                    "b | servers.B.test_b | needs a guest (without Neutron: not the start of the reason)"]
    marked = [uuid for uuid, _test, reason in conformance_lists.expected("volume") if reason.startswith("without Neutron:")]
    assert marked == ["b68bd8d6-855d-4212-b59b-2e704044dace", "6652dab9-ea24-4c93-ab5a-93d79c3041cf"]


def test_the_tests_that_log_in_to_their_guest_run_on_their_own_with_validation(tmp_path):
    """tempest-guest-ssh.txt's tests leave the volume phase's main run (when Neutron is there) for a run of their
    own on the loopback guest network, with validation on; their results join the phase's before its gate."""
    script = (ROOT / "scripts/conformance").read_text()
    [helper] = re.findall(r"(guest_ssh_tests\(\) \{\n.*?\n\}\n)", script, re.DOTALL)
    listed = [line.strip() for line in
              shared_path("reference/tempest/tempest-compute-volume.txt").read_text().splitlines() if line.strip()]
    (tmp_path / "load.txt").write_text("\n".join(listed) + "\n")
    command = f"GUEST_SSH_LIST={ROOT}/tests/conformance/tempest-guest-ssh.txt\n{helper}guest_ssh_tests {tmp_path}/load.txt"
    found = subprocess.run(["bash", "-c", command], check=True, capture_output=True, text=True).stdout.split()
    ssh = [line.split("|")[0].strip() for line in
           (ROOT / "tests/conformance/tempest-guest-ssh.txt").read_text().splitlines()
           if line.strip() and not line.startswith("#")]
    assert len(found) == len(ssh) == 1 and all(any(f"id-{u}" in t for t in found) for u in ssh)
    [body] = re.findall(r"run_volume_phase\(\) \{\n(.*?)\n\}\n", script, re.DOTALL)
    assert '--load-list "$RUN/volume-run-list.txt"' in body
    assert 'run_guest_ssh_tempest volume "$RUN/volume-ssh-list.txt" 1' in body
    assert 'cat "$RUN/tempest-volume-ssh.subunit" >> "$RUN/tempest-volume.subunit"' in body
    [runner] = re.findall(r"run_guest_ssh_tempest\(\) \{\n(.*?)\n\}\n", script, re.DOTALL)
    for setting in ("run_validation=true fixed_network_name=$net network_for_ssh=$net", "connect_method = fixed",
                    "image_ssh_user = ubuntu", "auth_method = keypair"):
        assert setting in runner, setting
