"""The child's jail: what the runner sets up in the code process before any user code runs.

Standard library only, and loaded by ``runner.py`` from its file path (the child never
imports relayflow). Four parts, each in :func:`enter` or :func:`lock`:

1. **No orphans, no terminal.** ``PR_SET_PDEATHSIG`` (SIGKILL), then a check that the parent
   is still the one that started us: a parent that died before the ``prctl`` would not
   trigger it. The process leads a session of its own with no controlling terminal and
   holds no terminal descriptor (:func:`detach_terminal`).
2. **A seccomp-BPF filter** (``PR_SET_NO_NEW_PRIVS``, then ``PR_SET_SECCOMP``): no sockets
   but ``AF_UNIX``, no signals but to itself, no ``ptrace`` or other reach into another
   process, no new processes, threads or ``exec``. A refused call fails with ``EACCES``,
   ``EPERM``, ``EAGAIN`` or ``ENOSYS``; a call from a foreign ABI (i386, x32, AArch32)
   kills the process with ``SIGSYS``. The table is :data:`RULES`.
3. **Standard library only.** :class:`StdlibOnly` replaces the path finder on
   ``sys.meta_path``: it searches the interpreter's standard-library directories fixed at
   start-up, whatever ``sys.path`` or a package's ``__path__`` says, and never a
   ``site-packages`` or ``dist-packages`` directory.
4. **Clear refusals.** An audit hook refuses, with a ``PermissionError`` that names the
   rule, the Python calls the filter would refuse anyway (socket creation, ``os.kill`` and
   ``os.killpg`` of another process), and reports the code's signals to itself.

Everything here fails closed: a kernel or platform where the filter cannot be installed
raises :class:`SetupError`, and the runner then runs no user code.
"""

from __future__ import annotations

import errno
import os
import struct
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SIGKILL = 9
#: Exit status of a child whose parent was gone before it could be bound to it.
EXIT_ORPHANED = 125

# Classic BPF, as seccomp runs it: load a word of ``struct seccomp_data``, compare, return.
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_RET_K = 0x06
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
#: ``struct seccomp_data``: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARGS = 16
#: ``AUDIT_ARCH_*`` of the two Lambda architectures, by ``os.uname().machine``.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
#: Syscall numbers at or above this on x86_64 are the x32 ABI.
X32_SYSCALL_BIT = 0x40000000

#: Socket families (Linux), by number; ``socket`` is not imported (start-up time).
AF_UNIX = 1
FAMILY_NAMES = {2: "AF_INET", 10: "AF_INET6", 16: "AF_NETLINK", 17: "AF_PACKET", 40: "AF_VSOCK"}
F_SETOWN = 8
F_SETSIG = 10
F_SETOWN_EX = 15
FIOSETOWN = 0x8901
SIOCSPGRP = 0x8902
#: Terminal ioctls (the same numbers on x86_64 and arm64, ``asm-generic/ioctls.h``).
TIOCSCTTY = 0x540E
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
TIOCCONS = 0x541D

#: Syscall numbers, (x86_64, aarch64), from the kernel's ``arch/x86/entry/syscalls/
#: syscall_64.tbl`` and ``include/uapi/asm-generic/unistd.h`` (arm64 uses the generic table;
#: it has no ``fork`` or ``vfork``). tests/unit/test_code_jail.py checks them against the
#: installed kernel headers.
SYSCALLS: dict[str, tuple[int, int | None]] = {
    "socket": (41, 198),
    "socketpair": (53, 199),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "kcmp": (312, 272),
    "perf_event_open": (298, 241),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "sched_setaffinity": (203, 122),
    "sched_setscheduler": (144, 119),
    "sched_setparam": (142, 118),
    "sched_setattr": (314, 274),
    "fcntl": (72, 25),
    "ioctl": (16, 29),
    "prctl": (157, 167),
    "clone": (56, 220),
    "clone3": (435, 435),
    "fork": (57, None),
    "vfork": (58, None),
    "execve": (59, 221),
    "execveat": (322, 281),
    "bpf": (321, 280),
}

#: Stands for the child's own pid in :data:`RULES`; the filter is built in the child.
SELF = -1


class SetupError(Exception):
    """The jail could not be set up here; no user code may run."""


class Deny:
    """Refuse the call with ``error``."""

    def __init__(self, error: int) -> None:
        self.error = error


class OnlyIf:
    """Allow the call only when its argument ``arg`` (the low 32 bits, which is all the
    kernel reads of an ``int`` or ``pid_t``) is one of ``values``; else refuse with ``error``."""

    def __init__(self, arg: int, values: Sequence[int], error: int) -> None:
        self.arg, self.values, self.error = arg, tuple(values), error


class Unless:
    """Refuse the call with ``error`` when its argument ``arg`` is one of ``values``."""

    def __init__(self, arg: int, values: Sequence[int], error: int) -> None:
        self.arg, self.values, self.error = arg, tuple(values), error


_OWN_PROCESS = OnlyIf(0, (SELF,), errno.EPERM)
_OWN_OR_CALLER = OnlyIf(0, (0, SELF), errno.EPERM)

#: What the filter does with each syscall it names. Every other syscall is allowed.
RULES: dict[str, Deny | OnlyIf | Unless] = {
    # Network: the reply channel is a file, and asyncio's self-pipe needs AF_UNIX.
    "socket": OnlyIf(0, (AF_UNIX,), errno.EACCES),
    "socketpair": OnlyIf(0, (AF_UNIX,), errno.EACCES),
    # io_uring can open sockets (IORING_OP_SOCKET) without the socket syscall.
    "io_uring_setup": Deny(errno.EPERM),
    "io_uring_enter": Deny(errno.EPERM),
    "io_uring_register": Deny(errno.EPERM),
    # Signals: to its own process only (its pid is its only thread group).
    "kill": _OWN_PROCESS,
    "tkill": _OWN_PROCESS,
    "tgkill": _OWN_PROCESS,
    "rt_sigqueueinfo": _OWN_PROCESS,
    "rt_tgsigqueueinfo": _OWN_PROCESS,
    "pidfd_send_signal": Deny(errno.EPERM),
    # A signal the kernel sends on the code's behalf: SIGIO (or any F_SETSIG signal) to
    # the owner of a file descriptor, which could be set to the parent.
    "fcntl": Unless(1, (F_SETOWN, F_SETOWN_EX, F_SETSIG), errno.EPERM),
    # Terminals: TIOCSTI pushes bytes into a terminal's input, so a shell reading it runs
    # them (root may do it to any terminal it can open; anyone to its controlling one);
    # TIOCLINUX does the same through a virtual console's selection; TIOCSCTTY lets root
    # steal another session's terminal; TIOCCONS redirects the console to one.
    "ioctl": Unless(
        1, (FIOSETOWN, SIOCSPGRP, TIOCSTI, TIOCLINUX, TIOCSCTTY, TIOCCONS), errno.EPERM
    ),
    # Reaching into another process of the same uid (the parent): its memory, its file
    # descriptors, its limits and its scheduling.
    "ptrace": Deny(errno.EPERM),
    "process_vm_readv": Deny(errno.EPERM),
    "process_vm_writev": Deny(errno.EPERM),
    "process_madvise": Deny(errno.EPERM),
    "pidfd_getfd": Deny(errno.EPERM),
    "kcmp": Deny(errno.EPERM),
    "perf_event_open": Deny(errno.EPERM),
    "migrate_pages": Deny(errno.EPERM),
    "move_pages": Deny(errno.EPERM),
    # eBPF: root (Lambda's is not, a local ``serve`` may be) can load programs that read
    # kernel and other processes' memory (bpf_probe_read) or attach to their sockets; an
    # unprivileged caller is refused by the kernel already (unprivileged_bpf_disabled).
    "bpf": Deny(errno.EPERM),
    "prlimit64": _OWN_OR_CALLER,
    "setpriority": Deny(errno.EPERM),
    "ioprio_set": Deny(errno.EPERM),
    "sched_setaffinity": _OWN_OR_CALLER,
    "sched_setscheduler": _OWN_OR_CALLER,
    "sched_setparam": _OWN_OR_CALLER,
    "sched_setattr": _OWN_OR_CALLER,
    # The parent-death signal must stay set.
    "prctl": Unless(0, (PR_SET_PDEATHSIG,), errno.EPERM),
    # No new process or thread (RLIMIT_NPROC does the same, but not for root), and no exec:
    # the process stays this runner with this filter. clone3 answers ENOSYS so that glibc
    # falls back to clone, which answers EAGAIN as RLIMIT_NPROC would.
    "clone": Deny(errno.EAGAIN),
    "clone3": Deny(errno.ENOSYS),
    "fork": Deny(errno.EAGAIN),
    "vfork": Deny(errno.EAGAIN),
    "execve": Deny(errno.EPERM),
    "execveat": Deny(errno.EPERM),
}


class _Program:
    """A classic-BPF program with forward jumps to named labels."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int | str, int | str, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def emit(self, op: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.code.append((op, jt, jf, k & 0xFFFFFFFF))

    def assemble(self) -> bytes:
        """``struct sock_filter[]``: u16 code, u8 jt, u8 jf, u32 k, in native byte order."""
        out = bytearray()
        for index, (op, jt, jf, k) in enumerate(self.code):
            out += struct.pack("=HBBI", op, self._jump(index, jt), self._jump(index, jf), k)
        return bytes(out)

    def _jump(self, index: int, target: int | str) -> int:
        if isinstance(target, int):
            return target
        offset = self.labels[target] - index - 1
        if not 0 <= offset <= 255:
            raise SetupError(f"seccomp filter jump to {target} out of range ({offset})")
        return offset


def filter_program(machine: str, pid: int) -> bytes:
    """The seccomp filter for ``machine`` (``os.uname().machine``) in the process ``pid``."""
    if machine not in AUDIT_ARCH:
        raise SetupError(f"no seccomp filter for the {machine} architecture")
    column = 0 if machine == "x86_64" else 1
    program = _Program()
    program.emit(BPF_LD_W_ABS, OFFSET_ARCH)
    program.emit(BPF_JEQ_K, AUDIT_ARCH[machine], jt=0, jf="ret kill")
    program.emit(BPF_LD_W_ABS, OFFSET_NR)
    if machine == "x86_64":
        program.emit(BPF_JGE_K, X32_SYSCALL_BIT, jt="ret kill", jf=0)
    errors: set[int] = set()
    for name, rule in RULES.items():
        number = SYSCALLS[name][column]
        if number is None:
            continue
        target = f"ret errno {rule.error}" if isinstance(rule, Deny) else f"rule {name}"
        program.emit(BPF_JEQ_K, number, jt=target)
        errors.add(rule.error)
    program.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    for name, rule in RULES.items():
        if isinstance(rule, Deny) or SYSCALLS[name][column] is None:
            continue
        program.label(f"rule {name}")
        program.emit(BPF_LD_W_ABS, OFFSET_ARGS + 8 * rule.arg)
        values = [pid if value == SELF else value for value in rule.values]
        if isinstance(rule, OnlyIf):
            for value in values:
                program.emit(BPF_JEQ_K, value, jt="ret allow")
            program.emit(BPF_RET_K, SECCOMP_RET_ERRNO | rule.error)
        else:
            for value in values:
                program.emit(BPF_JEQ_K, value, jt=f"ret errno {rule.error}")
            program.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    program.label("ret allow")
    program.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    program.label("ret kill")
    program.emit(BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    for error in sorted(errors):
        program.label(f"ret errno {error}")
        program.emit(BPF_RET_K, SECCOMP_RET_ERRNO | error)
    return program.assemble()


def _prctl() -> Callable[..., int]:
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError) as exc:
        raise SetupError(f"prctl is not available here ({exc})") from exc
    # Five arguments always: PR_SET_NO_NEW_PRIVS refuses (EINVAL) unless arg3-arg5 are 0.
    prctl.argtypes = (ctypes.c_int, *[ctypes.c_ulong] * 4)
    prctl.restype = ctypes.c_int

    def call(option: int, arg2: int, arg3: int = 0) -> int:
        if prctl(option, arg2, arg3, 0, 0) != 0:
            error = ctypes.get_errno()
            raise SetupError(f"prctl({option}) failed: {os.strerror(error)}")
        return 0

    return call


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` (the thread that started it)
    ends. Exits at once with :data:`EXIT_ORPHANED` when ``parent`` is already gone: the
    signal only covers a death after the ``prctl``."""
    _prctl()(PR_SET_PDEATHSIG, SIGKILL)
    if os.getppid() != parent:
        os._exit(EXIT_ORPHANED)


def install_filter(program: bytes) -> None:
    """Install the seccomp ``program`` on this (single-threaded) process, for good."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    prctl = _prctl()
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


class StdlibOnly:
    """A meta-path finder for the standard library alone: ``roots`` (the interpreter's own
    ``sys.path`` under ``-I -S``), never a ``site-packages`` or ``dist-packages`` below them.
    It stands in for the path finder, so edits of ``sys.path`` or ``__path__`` reach nothing
    new, and a spec found anywhere else (through an edited importer cache) is refused."""

    def __init__(self, path_finder: Any, roots: Sequence[str]) -> None:
        self._finder = path_finder
        self._roots = tuple(os.path.realpath(root) for root in roots)

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: Any = None
    ) -> ModuleSpec | None:
        search = list(self._roots) if path is None else [p for p in path if self.allows(p)]
        spec = self._finder.find_spec(name, search, target)
        if spec is None:
            return None
        places = list(spec.submodule_search_locations or ())
        if spec.has_location and spec.origin:
            places.append(spec.origin)
        return spec if all(self.allows(place) for place in places) else None

    def invalidate_caches(self) -> None:
        self._finder.invalidate_caches()

    def allows(self, place: Any) -> bool:
        """Whether ``place`` (a path) lies in the standard library."""
        if not isinstance(place, str):
            return False
        real = os.path.realpath(place)
        for root in self._roots:
            if real == root or real.startswith(root + os.sep):
                parts = real[len(root) :].split(os.sep)
                return "site-packages" not in parts and "dist-packages" not in parts
        return False


def guard_imports() -> StdlibOnly:
    """Swap the path finder on ``sys.meta_path`` for :class:`StdlibOnly` over the
    current ``sys.path``."""
    finders = [f for f in sys.meta_path if getattr(f, "__name__", "") == "PathFinder"]
    if len(finders) != 1:
        raise SetupError("the interpreter's path finder was not found on sys.meta_path")
    guard = StdlibOnly(finders[0], sys.path)
    sys.meta_path[:] = [f for f in sys.meta_path if f is not finders[0]] + [guard]
    sys.path_importer_cache.clear()
    return guard


class Refusals:
    """The ``PermissionError``\\ s the audit hook raised, by rule (``network``, ``signal``)."""

    def __init__(self) -> None:
        self._raised: list[tuple[BaseException, str]] = []

    def refuse(self, rule: str, code: int, message: str) -> PermissionError:
        error = PermissionError(code, message)
        self._raised.append((error, rule))
        return error

    def rule_of(self, exc: BaseException) -> str | None:
        """The rule behind ``exc``, or behind an exception it was raised from or while
        handling (``urllib`` wraps the socket's error in a ``URLError``)."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            for refused, rule in self._raised:
                if refused is current:
                    return rule
            current = current.__cause__ or current.__context__
        return None


def watch(pid: int, refusals: Refusals, on_own_signal: Callable[[int], None]) -> None:
    """An audit hook that refuses sockets other than ``AF_UNIX`` and signals to other
    processes with a clear ``PermissionError`` (the filter refuses them regardless, for
    code that calls the system directly), and calls ``on_own_signal`` before the code
    signals itself."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "socket.__new__" and args[1] != AF_UNIX:
            default = "AF_INET (the default)" if args[1] == -1 else args[1]
            family = FAMILY_NAMES.get(args[1], default)
            raise refusals.refuse(
                "network",
                errno.EACCES,
                f"code steps have no network: a socket of family {family} is refused; "
                "call HTTP APIs from a tool step",
            )
        if event in ("os.kill", "os.killpg"):
            target, number = args
            if event == "os.kill" and target == pid:
                on_own_signal(number)
                return
            raise refusals.refuse(
                "signal",
                errno.EPERM,
                f"code steps may signal only their own process: {event}({target}) is refused",
            )
        if event == "signal.pthread_kill":
            on_own_signal(args[1])

    sys.addaudithook(hook)


def detach_terminal() -> None:
    """Lead a session of our own (so no controlling terminal is shared with the parent or
    a shell), and refuse to go on holding a terminal descriptor: the parent passes regular
    files only, so one here is a mistake that would hand the code a terminal."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    try:
        names = os.listdir("/proc/self/fd")
    except OSError as exc:
        raise SetupError(f"the open descriptors cannot be listed ({exc})") from exc
    for name in names:
        fd = int(name)
        if os.isatty(fd):
            raise SetupError(f"the code process inherited a terminal (descriptor {fd})")


def enter(parent: int) -> None:
    """Bind this process to ``parent`` and detach it from any terminal: the first thing
    the runner does."""
    die_with_parent(parent)
    detach_terminal()


def lock(refusals: Refusals, on_own_signal: Callable[[int], None]) -> None:
    """Install the filter, the import guard and the audit hook: the last thing before the
    user's code. Raises :class:`SetupError` when any of them cannot be installed."""
    if not sys.platform.startswith("linux"):
        raise SetupError(f"the code sandbox needs Linux, not {sys.platform}")
    pid = os.getpid()
    install_filter(filter_program(os.uname().machine, pid))
    guard_imports()
    watch(pid, refusals, on_own_signal)
