# Devices of the x86-hosted emulator (tools/layers/build-qemu x86): the
# virt machine, what it selects (GIC, PL011, PL031, PCIe host bridge,
# fw_cfg, virtio-mmio, flash), and the PCI NIC of the emulated hosts
# (tools/cluster: -device virtio-net-pci).  Every test boots virt; the other
# boards of a full build are about a fifth of its compile time and would
# only be exercised by QEMU's generic every-board qtests.
CONFIG_ARM_VIRT=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_NET=y
