#!/bin/sh
# /init of the Memory Channel guest image (built by `mc-host image`).
#
# Kernel command line: mc.node=<id> mc.cmd=<base64 of a /bin/sh command line>
# Prints `MC-GUEST-READY node=<id>` when set up, runs the command, prints
# `MC-GUEST-EXIT <status>` and powers off.
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1

# What a user-space PCI driver needs: DMA-able, physically contiguous memory.
echo 64 > /proc/sys/vm/nr_hugepages
mkdir -p /dev/hugepages
mount -t hugetlbfs hugetlbfs /dev/hugepages

node=0
cmd_b64=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        mc.node=*) node="${arg#mc.node=}" ;;
        mc.cmd=*) cmd_b64="${arg#mc.cmd=}" ;;
    esac
done
export MC_NODE="$node"

# (a newline first: the firmware leaves escape sequences on the console's line)
echo
echo "MC-GUEST-READY node=$node"
if [ -n "$cmd_b64" ]; then
    if cmd="$(echo "$cmd_b64" | base64 -d)"; then
        /bin/sh -c "$cmd"
        status=$?
    else
        echo "mc-init: mc.cmd is not valid base64"
        status=125
    fi
else
    echo "mc-init: no mc.cmd on the kernel command line; starting a shell"
    /bin/sh
    status=$?
fi
echo "MC-GUEST-EXIT $status"
sync
poweroff -f
