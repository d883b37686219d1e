"""What a guest prints on its serial console: a Linux cloud image's boot, sized as the VM really is.

The kernel's lines show the machine it found (memory map and total, CPUs brought up, the root disk's
sectors), so they are derived from the VMI as KubeVirt resolves it (``Hardware.of``): memory and CPUs
from the VMI's domain (where KubeVirt writes the instancetype's guest memory and vCPUs), the disk from
the root disk's PersistentVolumeClaim.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

from openkeel_compute.emulator.store import now
from openkeel_compute.kubevirt.quantity import to_bytes

GIB = 1024**3
LOW_MEMORY_END = 0x80000000  # q35 keeps 2 GiB below 4 GiB for a guest larger than 2.75 GiB
HIGH_MEMORY_START = 0x100000000
TOP_RESERVED = 0x24000  # the BIOS's tables at the top of low memory


@dataclasses.dataclass(frozen=True)
class Hardware:
    memory: int = 2 * GIB  # bytes
    cpus: int = 1
    disk: int | None = None  # bytes of the root disk, None when no claim backs it

    @classmethod
    def of(cls, vmi: dict[str, Any], claim: Callable[[str], dict[str, Any] | None]) -> Hardware:
        """The VMI's guest memory and vCPUs, and its root disk's size from ``claim(name)`` (the PVC)."""
        spec = vmi.get("spec") or {}
        domain = spec.get("domain") or {}
        memory = (domain.get("memory") or {}).get("guest") or (
            (domain.get("resources") or {}).get("requests") or {}).get("memory")
        cpu = domain.get("cpu") or {}
        cpus = max(1, int(cpu.get("sockets") or 1) * int(cpu.get("cores") or 1) * int(cpu.get("threads") or 1))
        return cls(memory=int(to_bytes(memory)) if memory else cls.memory, cpus=cpus, disk=_root_disk(spec, claim))


def _root_disk(spec: dict[str, Any], claim: Callable[[str], dict[str, Any] | None]) -> int | None:
    """The size of the disk the guest boots from (lowest bootOrder, else the first disk): its claim's
    capacity, else what the claim asks for."""
    disks = ((spec.get("domain") or {}).get("devices") or {}).get("disks") or []
    if not disks:
        return None
    first = min(disks, key=lambda d: (d.get("bootOrder") is None, d.get("bootOrder") or 0, disks.index(d)))
    volume = next((v for v in spec.get("volumes") or () if v.get("name") == first.get("name")), {})
    name = (volume.get("dataVolume") or {}).get("name") or (volume.get("persistentVolumeClaim") or {}).get(
        "claimName")
    pvc = claim(name) if name else None
    if pvc is None:
        return None
    size = ((pvc.get("status") or {}).get("capacity") or {}).get("storage") or (
        ((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    return int(to_bytes(size)) if size else None


def human_size(n_bytes: int, base: int, units: tuple[str, ...]) -> str:
    """The kernel's string_get_size: three significant digits, ``10.7 GB`` / ``10.0 GiB``."""
    value, unit = float(n_bytes), 0
    while value >= base and unit < len(units) - 1:
        value /= base
        unit += 1
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:.{digits}f} {units[unit]}"


def memory_lines(memory: int) -> list[str]:
    """The firmware's memory map and the kernel's total for a guest of ``memory`` bytes."""
    low = LOW_MEMORY_END if memory > 0xB0000000 else memory
    lines = ["BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable",
             f"BIOS-e820: [mem 0x0000000000100000-0x{low - TOP_RESERVED - 1:016x}] usable"]
    if memory > low:
        lines.append(f"BIOS-e820: [mem 0x{HIGH_MEMORY_START:016x}-0x{HIGH_MEMORY_START + memory - low - 1:016x}] "
                     "usable")
    total = memory // 1024 - 536  # KiB the kernel counts: what the holes below 1 MiB and the tables leave
    available = total - total // 64 - min(94_513, total // 4)  # less its page tables, its own code and data
    return [*lines, f"Memory: {available}K/{total}K available (22528K kernel code, 4433K rwdata)"]


def _uptime(index: int, seed: int) -> str:
    """The kernel's "[ seconds.micro]" stamp of the index-th message (growing, a little irregular)."""
    micros = index * 37_211 + (seed * (index + 7)) % 29_989
    return f"[{micros // 1_000_000:5d}.{micros % 1_000_000:06d}]"


def boot_log(hostname: str, vmi_uid: str, address: str | None, mac: str | None, boot: int = 1,
             hardware: Hardware | None = None, nics: list[tuple[str, str | None, str | None]] | None = None
             ) -> list[str]:
    """What a cloud image's serial console shows through one boot: kernel, systemd, cloud-init, login.
    ``nics``: (guest name, IPv4 address, MAC) of each interface (default: one, ``enp1s0`` with ``address``).

    Lines end with CRLF as a serial line does; systemd's status marks carry their colour escapes.
    """
    nics = nics or [("enp1s0", address, mac)]
    hardware = hardware or Hardware()
    seed = int(hashlib.sha256(f"{vmi_uid}/{boot}".encode()).hexdigest()[:8], 16)
    memory = memory_lines(hardware.memory)
    cpus = hardware.cpus
    disk = []
    if hardware.disk is not None:
        sectors = hardware.disk // 512
        decimal = human_size(hardware.disk, 1000, ("B", "kB", "MB", "GB", "TB", "PB"))
        binary = human_size(hardware.disk, 1024, ("B", "KiB", "MiB", "GiB", "TiB", "PiB"))
        disk = [f"virtio_blk virtio2: [vda] {sectors} 512-byte logical blocks ({decimal}/{binary})",
                " vda: vda1 vda14 vda15"]
    kernel = [
        ("Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) (x86_64-linux-gnu-gcc-13 (Ubuntu 13.2.0-23ubuntu4) "
        "13.2.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #45-Ubuntu SMP PREEMPT_DYNAMIC"),
        ("Command line: BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=LABEL=cloudimg-rootfs ro console=tty1 "
        "console=ttyS0"),
        "BIOS-provided physical RAM map:",
        *memory[:-1],
        "NX (Execute Disable) protection: active",
        "DMI: KubeVirt None/RHEL, BIOS 1.16.3-2.el9 04/01/2014",
        "Hypervisor detected: KVM",
        "kvm-clock: Using msrs 4b564d01 and 4b564d00",
        "tsc: Detected 2399.998 MHz processor",
        "ACPI: Early table checksum verification disabled",
        f"smpboot: Allowing {cpus} CPUs, 0 hotplug CPUs",
        memory[-1],
        "smpboot: CPU0: Intel Xeon Processor (Icelake) (family: 0x6, model: 0x86, stepping: 0x0)",
        f"smp: Brought up 1 node, {cpus} CPU{'s' if cpus > 1 else ''}",
        "Freeing SMP alternatives memory: 44K",
        "clocksource: Switched to clocksource kvm-clock",
        *disk,
        *(f"virtio_net virtio{i if i == 0 else i + 2} {name}: renamed from eth{i}" for i, (name, _a, _m) in
          enumerate(nics)),
        "EXT4-fs (vda1): mounted filesystem with ordered data mode. Quota mode: none.",
        "Run /sbin/init as init process",
        "systemd[1]: systemd 255.4-1ubuntu8.4 running in system mode",
        "systemd[1]: Detected virtualization kvm.",
        f"systemd[1]: Hostname set to <{hostname}>.",
    ]
    lines = [f"{_uptime(i, seed)} {text}" for i, text in enumerate(kernel)]
    ok = "[\x1b[0;32m  OK  \x1b[0m]"
    lines += [f"{ok} Started {unit}." for unit in (
        "systemd-journald.service - Journal Service", "systemd-udevd.service - Rule-based Manager for Device Events",
        "systemd-networkd.service - Network Configuration", "cloud-init-local.service - Initial cloud-init job")]
    cidr = f"{address}/24" if address else "."
    lines += [
        f"cloud-init[512]: Cloud-init v. 24.1.3-0ubuntu3.3 running 'init' at {now()}. Up 7.42 seconds.",
        ("cloud-init[512]: ci-info: ++++++++++++++++++++++++++++++++++++++Net device info+++++++++++++++++++++++++++"
        "++++++++++++"),
        "cloud-init[512]: ci-info: | Device |  Up  |   Address   |    Mask   | Scope  |     Hw-Address    |",
        *(f"cloud-init[512]: ci-info: | {name} | True | {ip or '.'} | 255.255.255.0 | global | {hw or '.'} |"
          for name, ip, hw in nics),
        "cloud-init[512]: ci-info: |   lo   | True |  127.0.0.1  | 255.0.0.0 |  host  |         .         |",
        f"cloud-init[512]: ci-info: | Route | Destination | Gateway | Interface | {cidr} |",
        "cloud-init[512]: Generating public/private ed25519 key pair.",
        "cloud-init[512]: The key fingerprint is:",
        f"cloud-init[512]: SHA256:{hashlib.sha256(f'{vmi_uid}/ed25519'.encode()).hexdigest()[:43]} root@{hostname}",
        f"{ok} Started cloud-init.service - Cloud-init: Network Stage.",
        f"{ok} Reached target network-online.target - Network is Online.",
        f"{ok} Started ssh.service - OpenBSD Secure Shell server.",
        f"cloud-init[701]: Cloud-init v. 24.1.3-0ubuntu3.3 running 'modules:config' at {now()}. Up 11.87 seconds.",
        f"cloud-init[733]: Cloud-init v. 24.1.3-0ubuntu3.3 running 'modules:final' at {now()}. Up 12.61 seconds.",
        "-----BEGIN SSH HOST KEY FINGERPRINTS-----",
        f"256 SHA256:{hashlib.sha256(f'{vmi_uid}/ecdsa'.encode()).hexdigest()[:43]} root@{hostname} (ECDSA)",
        f"256 SHA256:{hashlib.sha256(f'{vmi_uid}/ed25519'.encode()).hexdigest()[:43]} root@{hostname} (ED25519)",
        "-----END SSH HOST KEY FINGERPRINTS-----",
        (f"cloud-init[733]: Cloud-init v. 24.1.3-0ubuntu3.3 finished at {now()}. Datasource DataSourceNoCloud "
        "[seed=/dev/vdb][dsmode=net].  Up 12.90 seconds"),
        f"{ok} Reached target cloud-init.target - Cloud-init target.",
        "",
        "Ubuntu 24.04.1 LTS " + hostname + " ttyS0",
        "",
        f"{hostname} login: ",
    ]
    return [line + "\r\n" for line in lines]


def reboot_log() -> list[str]:
    """What the console shows while the guest shuts down for a reboot (the next boot follows)."""
    ok = "[\x1b[0;32m  OK  \x1b[0m]"
    return [line + "\r\n" for line in (
        f"{ok} Stopped target cloud-init.target - Cloud-init target.",
        f"{ok} Stopped ssh.service - OpenBSD Secure Shell server.",
        f"{ok} Reached target shutdown.target - System Shutdown.",
        f"{ok} Finished systemd-reboot.service - System Reboot.",
        "reboot: Restarting system",
    )]
