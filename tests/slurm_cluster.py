"""A real single-node SLURM cluster for tests: munged, slurmctld and slurmd started by hand.

Everything lives under one temporary folder (configuration, munge key and socket, state,
spool, logs, pid files, a job-completion log) except two things SLURM gives no other way to:
``/etc/slurm/slurm.conf`` is a symlink to the generated configuration (the executor plugin's
job step strips ``SLURM_CONF`` from the job environment, so ``srun`` inside a job reads the
default path), and an existing file there is moved aside and put back on :meth:`stop`.

The node has two fake GPUs: ``gres.conf`` points ``Name=gpu File=`` at two character devices
made with ``mknod`` (without ``File=`` the node goes INVAL), so ``--gpus=1`` allocates one
and sets ``CUDA_VISIBLE_DEVICES`` in the job. Partitions: ``cpu`` (default) and ``gpu``.

Needs root and Debian's ``slurm-wlm`` and ``munge`` (installed with apt-get when missing).
Daemons run in the foreground of child processes and are stopped by their PIDs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
SLURM_CONF_DEFAULT = Path("/etc/slurm/slurm.conf")


class SlurmUnavailable(Exception):
    """SLURM cannot be set up on this machine (not root, no apt-get, install failed)."""


def _which(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for d in ("/usr/sbin", "/sbin") if (p := Path(d) / name).exists()),
                                      None)


def ensure_installed() -> None:
    """apt-get install slurm-wlm munge, only if a daemon or client is missing."""
    missing = [n for n in (*DAEMONS, "sbatch", "squeue") if _which(n) is None]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SlurmUnavailable(f"SLURM is not installed ({', '.join(missing)} missing) and cannot be "
                               "installed here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # wait for another apt/dpkg process holding the lock rather than fail at once
    cmd = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q", "slurm-wlm", "munge"]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-q"], env=env, capture_output=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SlurmUnavailable(f"apt-get install slurm-wlm munge failed:\n{proc.stderr[-2000:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    """One node ``localhost`` with ``cpus`` CPUs, ``mem_mb`` memory and ``gpus`` fake GPUs."""

    def __init__(self, root: Path, cpus: int | None = None, mem_mb: int = 16000, gpus: int = 2,
                 min_job_age: int = 600):
        self.root = Path(root)
        self.cpus = cpus or os.cpu_count() or 1
        self.mem_mb, self.gpus, self.min_job_age = mem_mb, gpus, min_job_age
        self.conf = self.root / "etc" / "slurm.conf"
        self.jobcomp = self.root / "jobcomp.txt"
        self.procs: dict[str, subprocess.Popen] = {}
        self._moved_conf: Path | None = None
        self._linked = False

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 60) -> "SlurmCluster":
        ensure_installed()
        if os.geteuid() != 0:
            raise SlurmUnavailable("starting slurmd needs root")
        try:
            self._write_files()
            self._link_default_conf()
            self._spawn("munged", [_which("munged"), "--foreground", "--force",
                                   f"--key-file={self.root / 'munge' / 'munge.key'}",
                                   f"--socket={self.munge_socket}",
                                   f"--pid-file={self.root / 'run' / 'munged.pid'}",
                                   f"--seed-file={self.root / 'munge' / 'munged.seed'}",
                                   f"--log-file={self.root / 'log' / 'munged.log'}"])
            self._wait(lambda: self.munge_socket.exists(), timeout, "munged socket")
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: self.scontrol("ping").returncode == 0, timeout, "slurmctld")
            self._spawn("slurmd", [_which("slurmd"), "-D", "-N", "localhost", "-f", str(self.conf)])
            self._wait(self._node_ready, timeout, "node localhost idle")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every daemon started here by its PID (TERM, then KILL), restore /etc/slurm/slurm.conf."""
        for name in reversed(list(self.procs)):
            proc = self.procs.pop(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)
            for handle in (proc.stdout, proc.stderr):
                if handle:
                    handle.close()
        if self._linked and SLURM_CONF_DEFAULT.is_symlink():
            SLURM_CONF_DEFAULT.unlink()
            self._linked = False
        if self._moved_conf is not None:
            self._moved_conf.rename(SLURM_CONF_DEFAULT)
            self._moved_conf = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- use -------------------------------------------------------------------------------------
    @property
    def munge_socket(self) -> Path:
        return self.root / "run" / "munge.socket"

    def env(self, base: dict | None = None) -> dict:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def command(self, *cmd: str, check: bool = False, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), env=self.env(), capture_output=True, text=True, check=check,
                              timeout=timeout)

    def scontrol(self, *args: str) -> subprocess.CompletedProcess:
        return self.command(_which("scontrol") or "scontrol", *args)

    def completed_jobs(self) -> list[dict]:
        """One dict per finished job from the job-completion log (JobId, Name, JobState, Partition, ...)."""
        if not self.jobcomp.exists():
            return []
        jobs = []
        for line in self.jobcomp.read_text().splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            if fields:
                jobs.append(fields)
        return jobs

    def log(self, daemon: str) -> str:
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # --- internals -------------------------------------------------------------------------------
    def _write_files(self) -> None:
        for sub in ("etc", "munge", "run", "log", "state", "spool", "dev"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        devices = []
        for i in range(self.gpus):
            dev = self.root / "dev" / f"nvidia{i}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, like /dev/null
            devices.append(dev)
        ctld_port, slurmd_port = _free_port(), _free_port()
        r = self.root
        self.conf.write_text(f"""\
ClusterName=radranktest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}
SlurmdPidFile={r / 'run' / 'slurmd.pid'}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
MinJobAge={self.min_job_age}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp}
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.mem_mb} Gres=gpu:{self.gpus} State=UNKNOWN
PartitionName=cpu Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
""")
        (self.conf.parent / "gres.conf").write_text(
            "AutoDetect=off\n" + "".join(f"NodeName=localhost Name=gpu File={d}\n" for d in devices))

    def _link_default_conf(self) -> None:
        SLURM_CONF_DEFAULT.parent.mkdir(parents=True, exist_ok=True)
        if SLURM_CONF_DEFAULT.exists() or SLURM_CONF_DEFAULT.is_symlink():
            self._moved_conf = SLURM_CONF_DEFAULT.with_name(f"slurm.conf.radrank-test-{os.getpid()}")
            SLURM_CONF_DEFAULT.rename(self._moved_conf)
        SLURM_CONF_DEFAULT.symlink_to(self.conf)
        self._linked = True

    def _spawn(self, name: str, cmd: list) -> None:
        out = open(self.root / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen([str(c) for c in cmd], env=self.env(), stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        out.close()

    def _node_ready(self) -> bool:
        out = self.command(_which("sinfo") or "sinfo", "-h", "-N", "-o", "%T").stdout.split()
        return bool(out) and all(state.rstrip("*") in ("idle", "mixed", "allocated") for state in out)

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode} while waiting for {what}:\n"
                                       f"{self._tail(name)}")
            if ready():
                return
            time.sleep(0.25)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n"
                           + "\n".join(self._tail(n) for n in self.procs))

    def _tail(self, name: str) -> str:
        text = ""
        for suffix in (".out", ".log"):
            path = self.root / "log" / f"{name}{suffix}"
            if path.exists():
                text += f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-20:]) + "\n"
        return text
