# Devices of the arm64 KVM-host QEMU (tools/layers/build-qemu arm64): the virt
# machine and what it selects (GIC, PL011, PL031, PCIe host bridge, fw_cfg,
# virtio-mmio).  The guests of the emulated hosts
# (tools/hosts/guest-domain.xml) need nothing more: direct kernel boot, a
# serial console, no USB, no balloon.
CONFIG_ARM_VIRT=y
