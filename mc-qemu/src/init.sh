#!/bin/sh
# /init of the Memory Channel guest image (built by `mc-host image`).
#
# Kernel command line: mc.node=<id> mc.cmd=<base64 of a /bin/sh command line>
# Prints `MC-GUEST-READY node=<id>` when set up, runs the command, prints
# `MC-GUEST-EXIT <status>` and powers off.
#
# With mc.agent=1 instead (`mc-host cluster up`): a command agent on the second
# serial port, /dev/ttyS1 (a QEMU socket chardev on the host). It prints
# `MC-AGENT-READY node=<id>` on the console and `MC-AGENT-READY` on ttyS1, then
# serves lines `RUN <id> <base64 command line>`: the command's output (stdout
# and stderr) goes to ttyS1, followed by the line `MC-CMD-END <id> <status>`.
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
agent=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        mc.node=*) node="${arg#mc.node=}" ;;
        mc.cmd=*) cmd_b64="${arg#mc.cmd=}" ;;
        mc.agent=1) agent=1 ;;
    esac
done
export MC_NODE="$node"

# (a newline first: the firmware leaves escape sequences on the console's line)
echo
echo "MC-GUEST-READY node=$node"
if [ -n "$agent" ]; then
    # Raw: no echo, no CR/LF translation, no line editing.
    stty -F /dev/ttyS1 115200 raw -echo
    exec 3<>/dev/ttyS1
    echo "MC-AGENT-READY" >&3
    echo "MC-AGENT-READY node=$node"
    while IFS= read -r line <&3; do
        set -- $line
        case "$1" in
            RUN)
                if cmd="$(echo "$3" | base64 -d)"; then
                    (cd / && /bin/sh -c "$cmd") </dev/null >&3 2>&3
                    status=$?
                else
                    echo "mc-agent: the command is not valid base64" >&3
                    status=125
                fi
                echo "MC-CMD-END $2 $status" >&3
                ;;
            POWEROFF)
                echo "MC-CMD-END $2 0" >&3
                break
                ;;
        esac
    done
    status=0
elif [ -n "$cmd_b64" ]; then
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
