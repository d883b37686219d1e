"""Seed 000 §6: the six reference flavors and their complete expected objects.

Inputs come from ``openkeel_compute.kubevirt.vectors`` (built from the §6 descriptions); the expected
objects are written out here in full. Where KubeVirt's own rules override seed 000 the vector says so:
vector 4 keeps SEV-SNP and turns secure boot off (KubeVirt v1.9 refuses both together), vector 6 has no
CPU limit (KubeVirt refuses resources.limits.cpu beside an instancetype) and uses the current topology
name "sockets" rather than the deprecated "preferSockets".
"""

from __future__ import annotations

from typing import Any

import pytest

from openkeel_compute.kubevirt.mapping import flavor_to_kubevirt
from openkeel_compute.kubevirt.vectors import VECTOR_OPTIONS, VECTORS

EXPECTED: dict[str, dict[str, Any]] = {}

EXPECTED['1-m1.small'] = {'documents': [{'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterInstancetype',
                'metadata': {'name': '2',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': '2',
                                             'openkeel.io/flavor-name': 'm1.small',
                                             'openkeel.io/extra-specs': '{}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '20',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'cpu': {'guest': 1}, 'memory': {'guest': '2048Mi'}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterPreference',
                'metadata': {'name': '2',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': '2',
                                             'openkeel.io/flavor-name': 'm1.small',
                                             'openkeel.io/extra-specs': '{}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '20',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {}}],
 'vm': {'apiVersion': 'kubevirt.io/v1',
        'kind': 'VirtualMachine',
        'metadata': {'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                     'annotations': {'openkeel.io/flavor-id': '2', 'openkeel.io/flavor-name': 'm1.small'}},
        'spec': {'instancetype': {'kind': 'VirtualMachineClusterInstancetype', 'name': '2'},
                 'preference': {'kind': 'VirtualMachineClusterPreference', 'name': '2'},
                 'dataVolumeTemplates': [{'metadata': {'name': 'root'},
                                          'spec': {'storage': {'resources': {'requests': {'storage': '20Gi'}}}}}],
                 'template': {'spec': {'domain': {'devices': {'disks': [{'name': 'root',
                                                                         'disk': {},
                                                                         'bootOrder': 1}]}},
                                       'volumes': [{'name': 'root', 'dataVolume': {'name': 'root'}}]}}}},
 'untranslated': [['disk', 'partial']]}

EXPECTED['2-private-ephemeral-swap'] = {'documents': [{'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineInstancetype',
                'metadata': {'name': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                                             'openkeel.io/flavor-name': 'private.scratch',
                                             'openkeel.io/extra-specs': '{"hw:vif_multiqueue_enabled":"true"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '0',
                                             'openkeel.io/ephemeral': '100',
                                             'openkeel.io/swap': '4096',
                                             'openkeel.io/rxtx-factor': '1.0',
                                             'openkeel.io/project-id': 'proj-a'},
                             'namespace': 'proj-a'},
                'spec': {'cpu': {'guest': 2}, 'memory': {'guest': '4096Mi'}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachinePreference',
                'metadata': {'name': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                                             'openkeel.io/flavor-name': 'private.scratch',
                                             'openkeel.io/extra-specs': '{"hw:vif_multiqueue_enabled":"true"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '0',
                                             'openkeel.io/ephemeral': '100',
                                             'openkeel.io/swap': '4096',
                                             'openkeel.io/rxtx-factor': '1.0',
                                             'openkeel.io/project-id': 'proj-a'},
                             'namespace': 'proj-a'},
                'spec': {'devices': {'preferredNetworkInterfaceMultiQueue': True}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineInstancetype',
                'metadata': {'name': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                                             'openkeel.io/flavor-name': 'private.scratch',
                                             'openkeel.io/extra-specs': '{"hw:vif_multiqueue_enabled":"true"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '0',
                                             'openkeel.io/ephemeral': '100',
                                             'openkeel.io/swap': '4096',
                                             'openkeel.io/rxtx-factor': '1.0',
                                             'openkeel.io/project-id': 'proj-b'},
                             'namespace': 'proj-b'},
                'spec': {'cpu': {'guest': 2}, 'memory': {'guest': '4096Mi'}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachinePreference',
                'metadata': {'name': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                                             'openkeel.io/flavor-name': 'private.scratch',
                                             'openkeel.io/extra-specs': '{"hw:vif_multiqueue_enabled":"true"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '0',
                                             'openkeel.io/ephemeral': '100',
                                             'openkeel.io/swap': '4096',
                                             'openkeel.io/rxtx-factor': '1.0',
                                             'openkeel.io/project-id': 'proj-b'},
                             'namespace': 'proj-b'},
                'spec': {'devices': {'preferredNetworkInterfaceMultiQueue': True}}}],
 'vm': {'apiVersion': 'kubevirt.io/v1',
        'kind': 'VirtualMachine',
        'metadata': {'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                     'annotations': {'openkeel.io/flavor-id': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c',
                                     'openkeel.io/flavor-name': 'private.scratch'}},
        'spec': {'instancetype': {'kind': 'VirtualMachineInstancetype',
                                  'name': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c'},
                 'preference': {'kind': 'VirtualMachinePreference',
                                'name': '6f2a1e4c-3b8d-4f5e-9a7c-1d2e3f4a5b6c'},
                 'dataVolumeTemplates': [{'metadata': {'name': 'root'}, 'spec': {'storage': {}}}],
                 'template': {'spec': {'domain': {'devices': {'disks': [{'name': 'root',
                                                                         'disk': {},
                                                                         'bootOrder': 1},
                                                                        {'name': 'ephemeral0', 'disk': {}},
                                                                        {'name': 'swap',
                                                                         'serial': 'swap',
                                                                         'disk': {}},
                                                                        {'name': 'cloudinitdisk',
                                                                         'disk': {}}]}},
                                       'volumes': [{'name': 'root', 'dataVolume': {'name': 'root'}},
                                                   {'name': 'ephemeral0', 'emptyDisk': {'capacity': '100Gi'}},
                                                   {'name': 'swap', 'emptyDisk': {'capacity': '4096Mi'}},
                                                   {'name': 'cloudinitdisk',
                                                    'cloudInitNoCloud': {'userData': '#cloud-config\n'
                                                                                     'bootcmd:\n'
                                                                                     '  - [mkswap, '
                                                                                     '/dev/disk/by-id/virtio-swap]\n'
                                                                                     '  - [swapon, '
                                                                                     '/dev/disk/by-id/virtio-swap]\n'}}]}}}},
 'untranslated': [['disk', 'partial'], ['OS-FLV-EXT-DATA:ephemeral', 'partial'], ['swap', 'approximate']]}

EXPECTED['3-nfv'] = {'documents': [{'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterInstancetype',
                'metadata': {'name': 'nfv-8',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'nfv-8',
                                             'openkeel.io/flavor-name': 'nfv.realtime',
                                             'openkeel.io/extra-specs': '{"hw:cpu_policy":"dedicated","hw:cpu_realtime":"yes","hw:cpu_realtime_mask":"^0-1","hw:cpu_thread_policy":"require","hw:emulator_threads_policy":"isolate","hw:mem_page_size":"1GB","hw:numa_nodes":"1","hw:pci_numa_affinity_policy":"required"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '40',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'cpu': {'guest': 8,
                                 'dedicatedCPUPlacement': True,
                                 'isolateEmulatorThread': True,
                                 'realtime': {'mask': '0-7,^0-1'},
                                 'numa': {'guestMappingPassthrough': {}}},
                         'memory': {'guest': '16384Mi', 'hugepages': {'pageSize': '1Gi'}}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterPreference',
                'metadata': {'name': 'nfv-8',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'nfv-8',
                                             'openkeel.io/flavor-name': 'nfv.realtime',
                                             'openkeel.io/extra-specs': '{"hw:cpu_policy":"dedicated","hw:cpu_realtime":"yes","hw:cpu_realtime_mask":"^0-1","hw:cpu_thread_policy":"require","hw:emulator_threads_policy":"isolate","hw:mem_page_size":"1GB","hw:numa_nodes":"1","hw:pci_numa_affinity_policy":"required"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '40',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {}}],
 'vm': {'apiVersion': 'kubevirt.io/v1',
        'kind': 'VirtualMachine',
        'metadata': {'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                     'annotations': {'openkeel.io/flavor-id': 'nfv-8',
                                     'openkeel.io/flavor-name': 'nfv.realtime'}},
        'spec': {'instancetype': {'kind': 'VirtualMachineClusterInstancetype', 'name': 'nfv-8'},
                 'preference': {'kind': 'VirtualMachineClusterPreference', 'name': 'nfv-8'},
                 'dataVolumeTemplates': [{'metadata': {'name': 'root'},
                                          'spec': {'storage': {'resources': {'requests': {'storage': '40Gi'}}}}}],
                 'template': {'spec': {'domain': {'devices': {'disks': [{'name': 'root',
                                                                         'disk': {},
                                                                         'bootOrder': 1}]}},
                                       'volumes': [{'name': 'root', 'dataVolume': {'name': 'root'}}]}}}},
 'untranslated': [['disk', 'partial'],
                  ['hw:cpu_thread_policy', 'node-level'],
                  ['hw:pci_numa_affinity_policy', 'node-level'],
                  ['hw:numa_nodes', 'partial']]}

EXPECTED['4-confidential'] = {'documents': [{'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterInstancetype',
                'metadata': {'name': 'conf-4',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'conf-4',
                                             'openkeel.io/flavor-name': 'confidential.snp',
                                             'openkeel.io/extra-specs': '{"hw:hide_hypervisor_id":"true","hw:mem_encryption":"true","hw:mem_encryption_model":"amd-sev-snp","hw:tpm_model":"tpm-crb","hw:tpm_version":"2.0","os:secure_boot":"required"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '40',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'cpu': {'guest': 4}, 'memory': {'guest': '8192Mi'}, 'launchSecurity': {'snp': {}}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterPreference',
                'metadata': {'name': 'conf-4',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'conf-4',
                                             'openkeel.io/flavor-name': 'confidential.snp',
                                             'openkeel.io/extra-specs': '{"hw:hide_hypervisor_id":"true","hw:mem_encryption":"true","hw:mem_encryption_model":"amd-sev-snp","hw:tpm_model":"tpm-crb","hw:tpm_version":"2.0","os:secure_boot":"required"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '40',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'firmware': {'preferredEfi': {'secureBoot': False}},
                         'devices': {'preferredTPM': {}},
                         'features': {'preferredKvm': {'hidden': True}}}}],
 'vm': {'apiVersion': 'kubevirt.io/v1',
        'kind': 'VirtualMachine',
        'metadata': {'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                     'annotations': {'openkeel.io/flavor-id': 'conf-4',
                                     'openkeel.io/flavor-name': 'confidential.snp'}},
        'spec': {'instancetype': {'kind': 'VirtualMachineClusterInstancetype', 'name': 'conf-4'},
                 'preference': {'kind': 'VirtualMachineClusterPreference', 'name': 'conf-4'},
                 'dataVolumeTemplates': [{'metadata': {'name': 'root'},
                                          'spec': {'storage': {'resources': {'requests': {'storage': '40Gi'}}}}}],
                 'template': {'spec': {'domain': {'devices': {'disks': [{'name': 'root',
                                                                         'disk': {},
                                                                         'bootOrder': 1}]}},
                                       'volumes': [{'name': 'root', 'dataVolume': {'name': 'root'}}]}}}},
 'untranslated': [['disk', 'partial'], ['os:secure_boot', 'none'], ['hw:tpm_model', 'partial']]}

EXPECTED['5-gpu-pci-traits'] = {'documents': [{'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterInstancetype',
                'metadata': {'name': 'gpu-8',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'gpu-8',
                                             'openkeel.io/flavor-name': 'gpu.a100',
                                             'openkeel.io/extra-specs': '{"aggregate_instance_extra_specs:region":"<in> '
                                                                        'r1","aggregate_instance_extra_specs:ssd":"true","pci_passthrough:alias":"nic-x710:2","resources:VGPU":"1","trait:HW_CPU_HYPERTHREADING":"forbidden","trait:HW_CPU_X86_AVX512F":"required"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '100',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'cpu': {'guest': 8},
                         'memory': {'guest': '32768Mi'},
                         'nodeSelector': {'openkeel.io/trait.HW_CPU_X86_AVX512F': 'true',
                                          'openkeel.io/aggregate.ssd': 'true'},
                         'hostDevices': [{'name': 'hostdevice1', 'deviceName': 'intel.com/X710_VF'},
                                         {'name': 'hostdevice2', 'deviceName': 'intel.com/X710_VF'}],
                         'gpus': [{'name': 'gpu1', 'deviceName': 'nvidia.com/GRID_A100_4C'}]}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterPreference',
                'metadata': {'name': 'gpu-8',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'gpu-8',
                                             'openkeel.io/flavor-name': 'gpu.a100',
                                             'openkeel.io/extra-specs': '{"aggregate_instance_extra_specs:region":"<in> '
                                                                        'r1","aggregate_instance_extra_specs:ssd":"true","pci_passthrough:alias":"nic-x710:2","resources:VGPU":"1","trait:HW_CPU_HYPERTHREADING":"forbidden","trait:HW_CPU_X86_AVX512F":"required"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '100',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {}}],
 'vm': {'apiVersion': 'kubevirt.io/v1',
        'kind': 'VirtualMachine',
        'metadata': {'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                     'annotations': {'openkeel.io/flavor-id': 'gpu-8',
                                     'openkeel.io/flavor-name': 'gpu.a100'}},
        'spec': {'instancetype': {'kind': 'VirtualMachineClusterInstancetype', 'name': 'gpu-8'},
                 'preference': {'kind': 'VirtualMachineClusterPreference', 'name': 'gpu-8'},
                 'dataVolumeTemplates': [{'metadata': {'name': 'root'},
                                          'spec': {'storage': {'resources': {'requests': {'storage': '100Gi'}}}}}],
                 'template': {'spec': {'domain': {'devices': {'disks': [{'name': 'root',
                                                                         'disk': {},
                                                                         'bootOrder': 1}]}},
                                       'volumes': [{'name': 'root', 'dataVolume': {'name': 'root'}}],
                                       'affinity': {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {'nodeSelectorTerms': [{'matchExpressions': [{'key': 'openkeel.io/trait.HW_CPU_HYPERTHREADING',
                                                                                                                                                                     'operator': 'NotIn',
                                                                                                                                                                     'values': ['true']}]}]}}}}}}},
 'untranslated': [['disk', 'partial'],
                  ['trait:HW_CPU_X86_AVX512F', 'partial'],
                  ['trait:HW_CPU_HYPERTHREADING', 'partial'],
                  ['aggregate_instance_extra_specs:ssd', 'partial'],
                  ['aggregate_instance_extra_specs:region', 'none'],
                  ['pci_passthrough:alias', 'partial'],
                  ['resources:VGPU', 'partial']]}

EXPECTED['6-qos-devices'] = {'documents': [{'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterInstancetype',
                'metadata': {'name': 'qos-2',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'qos-2',
                                             'openkeel.io/flavor-name': 'qos.devices',
                                             'openkeel.io/extra-specs': '{"hw:cpu_sockets":"2","hw:locked_memory":"true","hw:serial_port_count":"1","hw:sound_model":"virtio","hw:watchdog_action":"reset","my-own-key":"kept","quota:cpu_period":"100000","quota:cpu_quota":"50000","quota:disk_read_iops_sec":"500","quota:vif_inbound_average":"10240"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '20',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'cpu': {'guest': 2}, 'memory': {'guest': '4096Mi'}}},
               {'apiVersion': 'instancetype.kubevirt.io/v1beta1',
                'kind': 'VirtualMachineClusterPreference',
                'metadata': {'name': 'qos-2',
                             'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                             'annotations': {'openkeel.io/flavor-id': 'qos-2',
                                             'openkeel.io/flavor-name': 'qos.devices',
                                             'openkeel.io/extra-specs': '{"hw:cpu_sockets":"2","hw:locked_memory":"true","hw:serial_port_count":"1","hw:sound_model":"virtio","hw:watchdog_action":"reset","my-own-key":"kept","quota:cpu_period":"100000","quota:cpu_quota":"50000","quota:disk_read_iops_sec":"500","quota:vif_inbound_average":"10240"}',
                                             'openkeel.io/disabled': 'false',
                                             'openkeel.io/disk': '20',
                                             'openkeel.io/ephemeral': '0',
                                             'openkeel.io/swap': '',
                                             'openkeel.io/rxtx-factor': '1.0'}},
                'spec': {'cpu': {'preferredCPUTopology': 'sockets'},
                         'devices': {'preferredAutoattachSerialConsole': True}}}],
 'vm': {'apiVersion': 'kubevirt.io/v1',
        'kind': 'VirtualMachine',
        'metadata': {'labels': {'app.kubernetes.io/managed-by': 'openkeel'},
                     'annotations': {'openkeel.io/flavor-id': 'qos-2',
                                     'openkeel.io/flavor-name': 'qos.devices'}},
        'spec': {'instancetype': {'kind': 'VirtualMachineClusterInstancetype', 'name': 'qos-2'},
                 'preference': {'kind': 'VirtualMachineClusterPreference', 'name': 'qos-2'},
                 'dataVolumeTemplates': [{'metadata': {'name': 'root'},
                                          'spec': {'storage': {'resources': {'requests': {'storage': '20Gi'}}}}}],
                 'template': {'spec': {'domain': {'devices': {'disks': [{'name': 'root',
                                                                         'disk': {},
                                                                         'bootOrder': 1}],
                                                              'watchdog': {'name': 'watchdog',
                                                                           'i6300esb': {'action': 'reset'}}}},
                                       'volumes': [{'name': 'root', 'dataVolume': {'name': 'root'}}]},
                              'metadata': {'annotations': {'kubernetes.io/ingress-bandwidth': '81920k'}}}}},
 'untranslated': [['disk', 'partial'],
                  ['quota:cpu_period', 'none'],
                  ['quota:disk_read_iops_sec', 'node-level'],
                  ['hw:locked_memory', 'none'],
                  ['my-own-key', 'none'],
                  ['hw:cpu_sockets', 'partial'],
                  ['hw:sound_model', 'none'],
                  ['quota:cpu_quota', 'none'],
                  ['quota:vif_inbound_average', 'approximate']]}



def _first_difference(expected: Any, actual: Any, path: str = "") -> str:
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected.keys() | actual.keys():
            if key not in actual:
                return f"{path}.{key}: missing"
            if key not in expected:
                return f"{path}.{key}: unexpected {actual[key]!r}"
            found = _first_difference(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return ""
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = _first_difference(e, a, f"{path}[{index}]")
            if found:
                return found
        return ""
    return "" if expected == actual else f"{path}: expected {expected!r}, got {actual!r}"


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_reference_vector_produces_the_expected_objects(vector: str) -> None:
    result = flavor_to_kubevirt(VECTORS[vector], VECTOR_OPTIONS)
    actual = {
        "documents": result.documents(),
        "vm": result.vm,
        "untranslated": [[e.key, str(e.fidelity)] for e in result.untranslated],
    }
    difference = _first_difference(EXPECTED[vector], actual)
    assert not difference, f"vector {vector} differs at {difference}"


@pytest.mark.parametrize("vector", sorted(VECTORS))
def test_reference_vector_objects_are_strict_swagger_valid(vector: str, strict_errors: Any) -> None:
    result = flavor_to_kubevirt(VECTORS[vector], VECTOR_OPTIONS)
    for doc in [*result.documents(), result.vm]:
        assert strict_errors(doc) == [], f"{vector}: {doc['kind']} is refused by the strict schema"


def test_confidential_vector_keeps_snp_and_reports_secure_boot_as_refused_by_kubevirt() -> None:
    result = flavor_to_kubevirt(VECTORS["4-confidential"], VECTOR_OPTIONS)
    entry = next(e for e in result.report if e.key == "os:secure_boot")
    assert str(entry.fidelity) == "none" and "SEV/SNP" in entry.note, entry
    assert result.preferences[0]["spec"]["firmware"] == {"preferredEfi": {"secureBoot": False}}


def test_qos_vector_reports_the_cpu_limit_it_cannot_emit() -> None:
    result = flavor_to_kubevirt(VECTORS["6-qos-devices"], VECTOR_OPTIONS)
    entry = next(e for e in result.report if e.key == "quota:cpu_quota")
    assert "1000m" in entry.note and "limits.cpu" in entry.note, entry.note
    assert "resources" not in result.vm["spec"]["template"]["spec"]["domain"]
