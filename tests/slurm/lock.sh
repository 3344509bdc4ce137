# shellcheck shell=bash
# tests/slurm/lock.sh: the host's one lab lock.  The lab (lab.sh) uses fixed
# names (bridge, namespaces, user alice), so two labs on one host must not
# overlap: the lab's tests (common.sh), bench/slurm.sh and tests/fresh/run.sh
# all take this lock.
LAB_LOCK=/tmp/accelrun-lab.lock

# lab_lock SCRIPT ARGS...: runs the calling script again under the lock,
# unless it holds it already (ACCELRUN_LAB_LOCKED=1, exported to its children).
lab_lock() {
    if [ "${ACCELRUN_LAB_LOCKED:-0}" != 1 ]; then
        export ACCELRUN_LAB_LOCKED=1
        exec flock -w 3600 "$LAB_LOCK" bash "$@"
    fi
}
