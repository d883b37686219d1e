"""Nova's image property names (its ImageMetaProps fields) and the legacy names it still reads an image's
properties under: what the servers view shows at 2.98 and what the scheduler's image filters compare."""

#: Nova's image properties (ImageMetaProps' fields)
_WORDS = """
hw_architecture hw_auto_disk_config hw_boot_menu hw_cdrom_bus hw_cpu_cores hw_cpu_max_cores
hw_cpu_max_sockets hw_cpu_max_threads hw_cpu_policy hw_cpu_realtime_mask hw_cpu_sockets
hw_cpu_thread_policy hw_cpu_threads hw_device_id hw_disk_bus hw_disk_type hw_emulation_architecture
hw_ephemeral_encryption hw_ephemeral_encryption_format hw_ephemeral_encryption_secret_uuid
hw_firmware_stateless hw_firmware_type hw_floppy_bus hw_input_bus hw_ipxe_boot hw_locked_memory
hw_machine_type hw_maxphysaddr_bits hw_maxphysaddr_mode hw_mem_encryption hw_mem_encryption_model
hw_mem_page_size hw_numa_cpus hw_numa_mem hw_numa_nodes hw_pci_numa_affinity_policy hw_pmu
hw_pointer_model hw_qemu_guest_agent hw_redirected_usb_ports hw_rescue_bus hw_rescue_device
hw_rng_model hw_scsi_model hw_serial_port_count hw_sound_model hw_time_hpet hw_tpm_model
hw_tpm_version hw_usb_model hw_video_model hw_video_ram hw_vif_model hw_vif_multiqueue_enabled
hw_viommu_model hw_virtio_packed_ring hw_vm_mode hw_watchdog_action img_bdm_v2 img_bittorrent
img_block_device_mapping img_cache_in_nova img_compression_level img_config_drive
img_hide_hypervisor_id img_hv_requested_version img_hv_type img_linked_clone img_mappings
img_owner_id img_root_device_name img_signature img_signature_certificate_uuid
img_signature_hash_method img_signature_key_type img_use_agent img_version os_admin_user
os_command_line os_distro os_require_quiesce os_secure_boot os_skip_agent_inject_files_at_boot
os_skip_agent_inject_ssh os_type traits_required
"""
NAMES = frozenset(_WORDS.split())
#: the legacy names Nova still reads an image's properties under, and the property each one is
LEGACY = {
    "architecture": "hw_architecture", "owner_id": "img_owner_id", "vmware_disktype": "hw_disk_type",
    "vmware_image_version": "img_version", "vmware_ostype": "os_distro", "auto_disk_config": "hw_auto_disk_config",
    "ipxe_boot": "hw_ipxe_boot", "xenapi_device_id": "hw_device_id",
    "xenapi_image_compression_level": "img_compression_level", "vmware_linked_clone": "img_linked_clone",
    "xenapi_use_agent": "img_use_agent", "xenapi_skip_agent_inject_ssh": "os_skip_agent_inject_ssh",
    "xenapi_skip_agent_inject_files_at_boot": "os_skip_agent_inject_files_at_boot",
    "cache_in_nova": "img_cache_in_nova", "vm_mode": "hw_vm_mode", "bittorrent": "img_bittorrent",
    "mappings": "img_mappings", "block_device_mapping": "img_block_device_mapping", "bdm_v2": "img_bdm_v2",
    "root_device_name": "img_root_device_name", "hypervisor_version_requires": "img_hv_requested_version",
    "hypervisor_type": "img_hv_type",
}
#: every name an image property is read under: Nova's own and the legacy ones
ALL_NAMES = NAMES | frozenset(LEGACY)
