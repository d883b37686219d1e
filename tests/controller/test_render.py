"""No cluster: --render DIR keeps one kubectl-ready YAML file per object; the CLI and flavor status."""

from __future__ import annotations

import os

import yaml

from openkeel_compute.cmd.main import main


def run(conf, *args) -> int:
    return main([args[0], *args[1:], "--config-file", conf.config_file[0]] if args[0] != "flavor"
                else [*args[:2], "--config-file", conf.config_file[0], *args[2:]])


def test_render_writes_one_file_per_object_and_keeps_the_directory_in_step(conf, cat, tmp_path, capsys):
    out = tmp_path / "rendered"
    cat.create("m1-small", vcpus=2)
    cat.create("gold", public=False, access=("proj-a", "proj-b"))
    assert main(["controller", "--config-file", conf.config_file[0], "--render", str(out), "--once"]) == 0
    files = sorted(os.listdir(out))
    assert files == ["00-namespace.proj-a.yaml", "00-namespace.proj-b.yaml",  # created on demand, applied first
                     "cluster.virtualmachineclusterinstancetype.m1-small.yaml",
                     "cluster.virtualmachineclusterpreference.m1-small.yaml",
                     "proj-a.virtualmachineinstancetype.gold.yaml", "proj-a.virtualmachinepreference.gold.yaml",
                     "proj-b.virtualmachineinstancetype.gold.yaml", "proj-b.virtualmachinepreference.gold.yaml"]
    namespace = yaml.safe_load((out / files[0]).read_text())
    assert namespace == {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "proj-a", "labels": {"app.kubernetes.io/managed-by": "openkeel"},
                                      "annotations": {"openkeel.io/project-id": "proj-a"}}}
    doc = yaml.safe_load((out / files[2]).read_text())
    assert doc["apiVersion"] == "instancetype.kubevirt.io/v1beta1" and doc["spec"]["cpu"] == {"guest": 2}
    assert "resourceVersion" not in doc["metadata"]
    assert cat.pending() == []

    mtimes = {f: os.stat(out / f).st_mtime_ns for f in files}
    assert main(["controller", "--config-file", conf.config_file[0], "--render", str(out), "--once"]) == 0
    assert {f: os.stat(out / f).st_mtime_ns for f in files} == mtimes  # nothing to do: nothing written

    cat.remove_access("gold", "proj-a")
    cat.delete("m1-small")
    assert main(["controller", "--config-file", conf.config_file[0], "--render", str(out), "--once"]) == 0
    assert sorted(os.listdir(out)) == ["00-namespace.proj-a.yaml", "00-namespace.proj-b.yaml",  # never deleted
                                       "proj-b.virtualmachineinstancetype.gold.yaml",
                                       "proj-b.virtualmachinepreference.gold.yaml"]

    capsys.readouterr()
    assert main(["flavor", "status", "--config-file", conf.config_file[0], "--render", str(out)]) == 0
    assert "gold" in capsys.readouterr().out and "in-sync"


def test_flavor_status_explains_what_is_out_of_sync(conf, cat, tmp_path, capsys):
    out = tmp_path / "rendered"
    cat.create("m1", vcpus=2)
    assert main(["controller", "status", "--config-file", conf.config_file[0], "--render", str(out)]) == 1
    text = capsys.readouterr().out
    assert "m1" in text and "out-of-sync" in text and "missing" in text and "outbox row 1 (upsert) pending" in text
    main(["controller", "--config-file", conf.config_file[0], "--render", str(out), "--once"])
    capsys.readouterr()
    assert main(["flavor", "status", "m1", "--config-file", conf.config_file[0], "--render", str(out)]) == 0
    assert "in-sync" in capsys.readouterr().out


def test_render_keeps_dotted_names_and_moves_files_under_a_former_name(conf, cat, tmp_path):
    """Readable names carry dots (fl-m1.small): the directory must still read back as the same objects."""
    from openkeel_compute.controller.render import file_name, parse_file_name
    from openkeel_compute.kubevirt.names import former_names

    out = tmp_path / "rendered"
    cat.create("m1.small", vcpus=2)
    cat.create("gold.1", public=False, access=("cluster",))  # a project whose namespace is called "cluster"
    args = ["controller", "--config-file", conf.config_file[0], "--render", str(out), "--once"]
    assert main(args) == 0
    files = sorted(f for f in os.listdir(out) if not f.startswith("00-namespace."))
    assert files == ["cluster.virtualmachineclusterinstancetype.fl-m1.small.yaml",
                     "cluster.virtualmachineclusterpreference.fl-m1.small.yaml",
                     "cluster.virtualmachineinstancetype.fl-gold.1.yaml",
                     "cluster.virtualmachinepreference.fl-gold.1.yaml"]
    for name in files:
        assert file_name(parse_file_name(name)) == name
    mtimes = {f: os.stat(out / f).st_mtime_ns for f in files}
    assert main(args) == 0
    assert {f: os.stat(out / f).st_mtime_ns for f in files} == mtimes  # read back as in step: nothing written

    # A directory an earlier release rendered: the files under the former name are replaced.
    old = former_names("m1.small")[0]
    for kind in ("virtualmachineclusterinstancetype", "virtualmachineclusterpreference"):
        text = (out / f"cluster.{kind}.fl-m1.small.yaml").read_text().replace("name: fl-m1.small", f"name: {old}")
        (out / f"cluster.{kind}.{old}.yaml").write_text(text)
        (out / f"cluster.{kind}.fl-m1.small.yaml").unlink()
    assert main(args) == 0
    assert sorted(f for f in os.listdir(out) if not f.startswith("00-namespace.")) == files
