"""A qemu guest with a real Linux SCSI tape stack: tgt's emulated changer and drives,
logged in over iSCSI on the guest's loopback, seen through the kernel's st and sg drivers.

The guest runs the host's own root file system read-only (virtio-9p), so the same Python,
tssd and tools run inside it; an exchange directory on the host is shared read-write and
carries jobs (shell scripts) in and their output and exit code out (``guest.sh``). Nothing
leaves the guest: it has no network device, only its loopback.

Use from Python (tests/vm/conftest.py) or the command line::

    python3 tests/vm/scsivm.py run -- mtx -f /dev/sg3 status
    python3 tests/vm/scsivm.py shell-script job.sh --drives 3 --tapes 10

Every step has a timeout and the guest is always powered off (or killed) at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
#: Cartridges of the test library (guest.sh names them) and their tgtimg size.
VOLUMES = [f"TSS{i:03d}L8" for i in range(1, 9)]
TAPE_MB = 16
CACHE = Path(tempfile.gettempdir()) / "tssdvm-cache"


class VMError(RuntimeError):
    """The guest could not be started or did not answer in time."""


def kernel() -> tuple[str, Path]:
    """The newest installed Debian kernel with its modules: (version, vmlinuz)."""
    found = []
    for image in Path("/boot").glob("vmlinuz-*"):
        version = image.name.removeprefix("vmlinuz-")
        if (Path("/lib/modules") / version / "modules.dep").exists():
            found.append((image.stat().st_mtime, version, image))
    if not found:
        raise VMError("no /boot/vmlinuz-* with modules: run tests/vm/install.sh")
    _, version, image = max(found)
    return version, image


def initramfs(version: str) -> Path:
    """Build (once per kernel and script version) the busybox initramfs of the guest."""
    digest = hashlib.sha256()
    for name in ("init", "initramfs.sh"):
        digest.update((HERE / name).read_bytes())
    out = CACHE / f"initrd-{version}-{digest.hexdigest()[:12]}.gz"
    if not out.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["bash", str(HERE / "initramfs.sh"), version, str(out)], check=True, timeout=120
        )
    return out


def _qemu_base(accel: str, memory_mb: int, cpus: int, image: Path, initrd: Path) -> list[str]:
    return [
        "qemu-system-x86_64",
        "-accel",
        accel,
        "-m",
        str(memory_mb),
        "-smp",
        str(cpus),
        "-display",
        "none",
        "-monitor",
        "none",
        "-no-reboot",
        "-nic",
        "none",
        "-kernel",
        str(image),
        "-initrd",
        str(initrd),
    ]


_ACCEL: str | None = None


def detect_accel(timeout_s: float = 8.0) -> str:
    """``kvm`` when a KVM guest really boots here, else ``tcg`` (software emulation).

    /dev/kvm can exist and open while a KVM guest hangs (nested or restricted
    virtualisation), so the probe boots the initramfs to its first line and powers off.
    """
    global _ACCEL  # noqa: PLW0603 - one probe per process
    forced = os.environ.get("TSSDVM_ACCEL")
    if forced:
        return forced
    if _ACCEL is not None:
        return _ACCEL
    version, image = kernel()
    # The answer is kept per kernel and qemu binary: a failing probe costs its timeout.
    qemu = shutil.which("qemu-system-x86_64") or "qemu-system-x86_64"
    key = f"{version}-{int(Path(qemu).stat().st_mtime) if Path(qemu).exists() else 0}"
    cached = CACHE / f"accel-{key}"
    if cached.exists():
        _ACCEL = cached.read_text().strip()
        return _ACCEL
    _ACCEL = "tcg"
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        cmd = [
            *_qemu_base("kvm", 128, 1, image, initramfs(version)),
            "-serial",
            "stdio",
            "-append",
            "console=ttyS0 quiet panic=-1 tssdvm.probe=1",
        ]
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            probe = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
            if b"tssdvm: probe ok" in probe.stdout:
                _ACCEL = "kvm"
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(_ACCEL)
    return _ACCEL


@dataclass
class Library:
    """What the guest reported when its library came up."""

    uptime_s: float
    changer: str
    #: (st device, serial, sg device) per drive, in /dev order.
    drives: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Result:
    rc: int
    output: str
    seconds: float


class GuestVM:
    """One guest; ``start()`` boots it and waits for the library, ``stop()`` powers off."""

    def __init__(
        self,
        *,
        drives: int = 2,
        tapes: int = 8,
        tape_mb: int = 64,
        memory_mb: int = 768,
        cpus: int = 2,
        share: Path | None = None,
    ) -> None:
        if not 1 <= drives <= 8 or not 1 <= tapes <= 64 or not 1 <= tape_mb <= 4096:
            raise ValueError("drives 1-8, tapes 1-64, tape_mb 1-4096")
        self.drives, self.tapes, self.tape_mb = drives, tapes, tape_mb
        self.memory_mb, self.cpus = memory_mb, cpus
        self._own_share = share is None
        self.share = share or Path(tempfile.mkdtemp(prefix="tssdvm-", dir="/tmp"))
        self.jobs = self.share / "jobs"
        self.console = self.share.parent / f"{self.share.name}.console.log"
        self.accel = ""
        self.boot_s = 0.0
        self.library: Library | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._seq = 0

    # -- lifecycle -------------------------------------------------------------------

    def start(self, timeout_s: float = 90.0) -> Library:
        started = time.monotonic()
        self.accel = detect_accel()
        version, image = kernel()
        initrd = initramfs(version)
        self.share.mkdir(parents=True, exist_ok=True)
        self.jobs.mkdir(exist_ok=True)
        shutil.copy(HERE / "guest.sh", self.share / "guest.sh")
        (self.share / "vm.env").write_text(
            f"DRIVES={self.drives} TAPES={self.tapes} TAPE_MB={self.tape_mb}\n"
        )
        append = (
            f"console=ttyS0 quiet panic=-1 tssdvm.share={self.share} "
            f"tssdvm.script={self.share / 'guest.sh'} tssdvm.repo={REPO}"
        )
        # setpriv: qemu gets SIGKILL when this process dies, even by SIGKILL, so no guest
        # outlives its test run.
        cmd = [
            *(["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []),
            *_qemu_base(self.accel, self.memory_mb, self.cpus, image, initrd),
            "-serial",
            f"file:{self.console}",
            "-append",
            append,
            "-virtfs",
            "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
            "-virtfs",
            f"local,path={self.share},mount_tag=share,security_model=none,multidevs=remap",
        ]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            self.library = self._wait_ready(started + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.boot_s = time.monotonic() - started
        return self.library

    def _wait_ready(self, deadline: float) -> Library:
        ready, failed = self.share / "ready", self.share / "failed"
        while not ready.exists():
            if failed.exists():
                raise VMError(f"guest setup failed: {failed.read_text().strip()}\n{self.tail()}")
            assert self._proc is not None
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise VMError(f"qemu exited ({self._proc.returncode}): {err}\n{self.tail()}")
            if time.monotonic() > deadline:
                raise VMError(f"guest not ready in time\n{self.tail()}")
            time.sleep(0.1)
        info: dict[str, str] = {}
        drives = []
        for line in ready.read_text().splitlines():
            key, _, value = line.partition("=")
            if key == "drive":
                st, serial, sg = value.split()
                drives.append((st, serial, sg))
            else:
                info[key] = value
        return Library(float(info["uptime"]), info["changer"], drives)

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.console.read_text(errors="replace")
        except OSError:
            return "(no console log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the guest to log out and power off; kill qemu if it does not in time."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                (self.jobs / "STOP").touch()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            if proc.stderr:
                proc.stderr.close()
        if self._own_share:
            shutil.rmtree(self.share, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.console.unlink()

    def __enter__(self) -> GuestVM:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- jobs ------------------------------------------------------------------------

    def submit(self, script: str) -> Path:
        """Start a shell script in the guest; returns its job path (without suffix)."""
        if self._proc is None or self._proc.poll() is not None:
            raise VMError("the guest is not running")
        self._seq += 1
        name = self.jobs / f"job{self._seq:04d}"
        tmp = name.with_suffix(".tmp")
        tmp.write_text(script)
        tmp.rename(name.with_suffix(".sh"))
        return name

    def wait(self, job: Path, timeout_s: float) -> Result:
        started = time.monotonic()
        rc_file = job.with_suffix(".rc")
        while not rc_file.exists():
            if self._proc is None or self._proc.poll() is not None:
                raise VMError(f"the guest died during {job.name}\n{self.tail()}")
            if time.monotonic() - started > timeout_s:
                out = job.with_suffix(".out")
                partial = out.read_text(errors="replace") if out.exists() else ""
                raise VMError(f"{job.name} did not finish in {timeout_s} s:\n{partial[-3000:]}")
            time.sleep(0.05)
        output = job.with_suffix(".out").read_text(errors="replace")
        return Result(int(rc_file.read_text().strip()), output, time.monotonic() - started)

    def run(self, script: str, timeout_s: float = 120.0) -> Result:
        return self.wait(self.submit(script), timeout_s)


def guest_python(vm: GuestVM, args: str, timeout_s: float, env: str = "") -> tuple[int, str]:
    """Run the repository's Python (its venv) in the guest; (exit code, output)."""
    script = (
        f"cd {REPO}\n"
        f"export PYTHONDONTWRITEBYTECODE=1 TSSD_SCSI_VM={vm.share / 'vm.json'} "
        f"VM_SHARE={vm.share} {env}\n"
        f"exec {sys.executable} {args}\n"
    )
    result = vm.run(script, timeout_s)
    return result.rc, result.output


@contextlib.contextmanager
def guest(**kwargs: int) -> Iterator[GuestVM]:
    vm = GuestVM(**kwargs)
    try:
        vm.start()
        yield vm
    finally:
        vm.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--drives", type=int, default=2)
    parser.add_argument("--tapes", type=int, default=8)
    parser.add_argument("--tape-mb", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=600.0, help="per command (s)")
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="run one command in the guest")
    run.add_argument("command", nargs=argparse.REMAINDER)
    script = sub.add_parser("script", help="run a shell script file in the guest")
    script.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    if args.what == "run":
        command = [c for c in args.command if c != "--"]
        text = " ".join(_quote(c) for c in command) + "\n"
    else:
        text = args.path.read_text()
    with guest(drives=args.drives, tapes=args.tapes, tape_mb=args.tape_mb) as vm:
        assert vm.library is not None
        print(
            f"tssdvm: ready in {vm.boot_s:.1f} s ({vm.accel}); changer {vm.library.changer}; "
            f"drives {vm.library.drives}",
            file=sys.stderr,
        )
        result = vm.run(text, args.timeout)
    sys.stdout.write(result.output)
    return result.rc


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


if __name__ == "__main__":
    sys.exit(main())
