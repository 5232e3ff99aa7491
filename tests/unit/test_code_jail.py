"""The code sandbox's jail, attacked from inside: no network, no signals beyond the child's
own process, no orphans, no layer imports, and failure causes told apart.

Each escape test runs from a parent of two uids: root, and uid 65534 standing in for Lambda's
non-root user (tests/support/sandbox_parent.py). The parent is a process of its own, so a
signal that got through would show as a parent that did not finish the step.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Iterator
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

import pytest
from sandbox_parent import PARENT_UIDS, ReadableCopy, make_readable_copy, run_as, start_parent

import relayflow.sandbox as sandbox
from relayflow.errors import CodeError, CodeLimitExceeded
from relayflow.sandbox import Limits, jail, run_code

MACHINE = os.uname().machine
COLUMN = {"x86_64": 0, "aarch64": 1}.get(MACHINE)
FAST = Limits(cpu_seconds=2, memory_mb=128, wall_seconds=10, output_bytes=100_000)

#: User code: ``call(nr, *args)`` makes a raw system call (around Python's audit hooks) and
#: answers "ok" or minus the errno.
RAW_SYSCALL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(number, *args):
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    return -ctypes.get_errno() if result == -1 else "ok"
"""


@pytest.fixture(scope="module")
def copy() -> Iterator[ReadableCopy]:
    yield from make_readable_copy()


def nr(name: str) -> int:
    if COLUMN is None:
        pytest.skip(f"no seccomp filter for {MACHINE}")
    number = jail.SYSCALLS[name][COLUMN]
    assert number is not None
    return number


def refused(outcome: dict[str, Any], rule: str) -> None:
    """The step failed with a PermissionError that names ``rule``."""
    assert outcome["error"] == "Relayflow.CodeError", outcome
    assert outcome["exception"] == "PermissionError", outcome
    assert outcome["rule"] == rule, outcome


# --------------------------------------------------------------------------- network


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_tcp_to_a_local_listener_is_refused(uid, copy):
    # Given a listener on loopback, where Lambda serves its Runtime API
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        # When the code connects to it
        outcome = run_as(
            uid,
            copy,
            "import socket\nsocket.create_connection(('127.0.0.1', input), timeout=2)\nreturn 1",
            input=port,
        )
        # Then the step fails naming the network rule, and nothing reached the listener
        refused(outcome, "network")
        assert "code steps have no network" in outcome["message"]
        listener.settimeout(0)
        with pytest.raises(BlockingIOError):
            listener.accept()


@pytest.mark.parametrize("uid", PARENT_UIDS)
@pytest.mark.parametrize(
    "address", [("1.1.1.1", 443), ("169.254.169.254", 80)], ids=["public", "metadata"]
)
def test_tcp_to_a_public_or_link_local_address_is_refused(uid, copy, address):
    outcome = run_as(
        uid,
        copy,
        "import socket\nsocket.create_connection(tuple(input), timeout=2)\nreturn 1",
        input=list(address),
    )
    refused(outcome, "network")


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_an_http_request_from_the_standard_library_is_refused(uid, copy):
    outcome = run_as(
        uid, copy, "import urllib.request\nurllib.request.urlopen('http://169.254.169.254/')"
    )
    assert outcome["exception"] == "urllib.error.URLError"
    assert outcome["rule"] == "network"


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_udp_send_is_refused(uid, copy):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        outcome = run_as(
            uid,
            copy,
            "import socket\n"
            "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', input))",
            input=receiver.getsockname()[1],
        )
        refused(outcome, "network")
        receiver.settimeout(0)
        with pytest.raises(BlockingIOError):
            receiver.recv(10)


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_kernel_refuses_ip_packet_and_netlink_sockets_however_they_are_made(uid, copy):
    # Given code that calls socket(2) directly, around Python's audit hook
    families = {
        "AF_INET": socket.AF_INET,
        "AF_INET6": socket.AF_INET6,
        "AF_PACKET": socket.AF_PACKET,
        "AF_NETLINK": socket.AF_NETLINK,
        "AF_UNIX": socket.AF_UNIX,
    }
    source = (
        RAW_SYSCALL + "return {name: call(input['nr'], f, 2, 0) for name, f in input['f'].items()}"
    )
    # When it asks for a socket of each family
    outcome = run_as(uid, copy, source, input={"nr": nr("socket"), "f": families})
    # Then only AF_UNIX is created; the rest fail with EACCES from the seccomp filter
    assert outcome["value"] == {
        "AF_INET": -13,
        "AF_INET6": -13,
        "AF_PACKET": -13,
        "AF_NETLINK": -13,
        "AF_UNIX": "ok",
    }


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_io_uring_which_can_open_sockets_is_refused(uid, copy):
    source = RAW_SYSCALL + "params = ctypes.create_string_buffer(120)\n"
    source += "return call(input, 8, ctypes.addressof(params))"
    assert run_as(uid, copy, source, input=nr("io_uring_setup"))["value"] == -1


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_unix_sockets_and_asyncio_still_work(uid, copy):
    source = (
        "import asyncio, socket\n"
        "a, b = socket.socketpair()\n"
        "a.sendall(b'ping')\n"
        "async def main():\n"
        "    return b.recv(4).decode()\n"
        "return asyncio.run(main())\n"
    )
    assert run_as(uid, copy, source)["value"] == "ping"


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize("uid", PARENT_UIDS)
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP], ids=["SIGKILL", "SIGSTOP"])
def test_the_code_cannot_kill_or_stop_its_parent(uid, copy, signum):
    # When the code signals its parent, the Lambda handler
    outcome = run_as(uid, copy, "import os\nos.kill(os.getppid(), input)", input=int(signum))
    # Then the parent lives to finish the step (run_as checks it exited 0), which failed
    refused(outcome, "signal")
    assert "may signal only their own process" in outcome["message"]


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_kernel_refuses_every_other_way_to_reach_the_parent(uid, copy):
    # Given code that calls the system directly, each call harmless if it got through
    source = RAW_SYSCALL + (
        "p = os.getppid()\n"
        "n = input\n"
        "pidfd = os.pidfd_open(p)\n"
        "old = ctypes.create_string_buffer(16)\n"
        "r, w = os.pipe()\n"
        "return {\n"
        "    'kill': call(n['kill'], p, 0),\n"
        "    'killpg': call(n['kill'], -os.getpgid(p), 0),\n"
        "    'tkill': call(n['tkill'], p, 0),\n"
        "    'tgkill': call(n['tgkill'], p, p, 0),\n"
        "    'pidfd_send_signal': call(n['pidfd_send_signal'], pidfd, 0, 0, 0),\n"
        "    'ptrace': call(n['ptrace'], 0x4206, p, 0, 0),\n"
        "    'prlimit64': call(n['prlimit64'], p, 7, 0, ctypes.addressof(old)),\n"
        "    'setpriority': call(n['setpriority'], 0, p, 0),\n"
        "    'fcntl_setown': call(n['fcntl'], w, 8, p),\n"
        "    'clear_parent_death_signal': call(n['prctl'], 1, 0, 0, 0, 0),\n"
        "}\n"
    )
    names = ["kill", "tkill", "tgkill", "pidfd_send_signal", "ptrace", "prlimit64"]
    numbers = {name: nr(name) for name in [*names, "setpriority", "fcntl", "prctl"]}
    # When it runs
    outcome = run_as(uid, copy, source, input=numbers)
    # Then every call is refused with EPERM
    assert outcome["value"] == dict.fromkeys(
        [
            "kill",
            "killpg",
            "tkill",
            "tgkill",
            "pidfd_send_signal",
            "ptrace",
            "prlimit64",
            "setpriority",
            "fcntl_setown",
            "clear_parent_death_signal",
        ],
        -1,
    )


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_code_may_still_signal_itself(uid, copy):
    source = (
        "import os, signal\n"
        "got = []\n"
        "signal.signal(signal.SIGUSR1, lambda *a: got.append('usr1'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n"
        "signal.signal(signal.SIGUSR2, lambda *a: got.append('usr2'))\n"
        "signal.raise_signal(signal.SIGUSR2)\n"
        "return got\n"
    )
    assert run_as(uid, copy, source)["value"] == ["usr1", "usr2"]


# --------------------------------------------------------------------------- terminals

#: User code: push "id\n" into a terminal's input with TIOCSTI (a shell reading that terminal
#: would run it), through each way the code could reach one. Answers, per way, "typed" or the
#: name of the errno the open or the ioctl failed with.
TIOCSTI_ATTACK = """
import errno, fcntl, os, termios
def push(fd):
    try:
        for byte in b"id\\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
    except OSError as exc:
        return errno.errorcode[exc.errno]
    return "typed"
def open_and_push(path):
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError as exc:
        return "open: " + errno.errorcode[exc.errno]
    return push(fd)
return {
    "inherited_is_a_terminal": os.isatty(input["fd"]),
    "inherited": push(input["fd"]),
    "dev_tty": open_and_push("/dev/tty"),
    "pts": open_and_push(input["pts"]),
}
"""


@pytest.fixture()
def terminal() -> Iterator[int]:
    """A pseudo-terminal made here (the tests run without one): its follower side, raw and
    non-blocking, so whatever is typed into it can be read back at once."""
    leader, follower = os.openpty()
    tty.setraw(follower)
    os.set_blocking(follower, False)
    try:
        yield follower
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_code_cannot_type_into_a_terminal(uid, copy, terminal):
    # Given a terminal owned by the parent's user, which the parent holds open, and whose
    # path the code knows (root may type into any terminal; anyone into its controlling one,
    # which opening a terminal as a session leader makes it)
    path = os.ttyname(terminal)
    os.chown(path, uid, -1)
    # When the code tries TIOCSTI on the inherited descriptor, /dev/tty and that path
    outcome = run_as(
        uid,
        copy,
        TIOCSTI_ATTACK,
        input={"fd": terminal, "pts": path},
        pass_fds=(terminal,),
    )
    # Then the descriptor was not inherited, there is no controlling terminal, and the
    # filter refuses the ioctl itself
    assert outcome["value"] == {
        "inherited_is_a_terminal": False,
        "inherited": "EPERM",
        "dev_tty": "open: ENXIO",
        "pts": "EPERM",
    }
    # And nothing reached the terminal's input
    with pytest.raises(BlockingIOError):
        os.read(terminal, 100)


def test_a_child_holding_a_terminal_runs_no_code(terminal):
    # Given this process, which holds a terminal descriptor
    # When the jail checks its descriptors
    # Then it refuses to go on
    with pytest.raises(jail.SetupError, match=r"inherited a terminal \(descriptor \d+\)"):
        jail.detach_terminal()


#: User code: create a one-entry eBPF array map (harmless in itself, the first step of loading
#: a program), answering "ok" or minus the errno.
BPF_ATTACK = (
    RAW_SYSCALL
    + """
import struct
# union bpf_attr for BPF_MAP_CREATE: map_type (BPF_MAP_TYPE_ARRAY), key_size, value_size,
# max_entries, then zeros
attr = ctypes.create_string_buffer(struct.pack("=IIII", 2, 4, 4, 1) + bytes(56))
return call(input, 0, ctypes.addressof(attr), 72)
"""
)


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_bpf_is_refused_even_as_root(uid, copy):
    # Given code that calls bpf(BPF_MAP_CREATE) directly, which root may do outside the jail
    # When it runs
    outcome = run_as(uid, copy, BPF_ATTACK, input=nr("bpf"))
    # Then the filter refuses it with EPERM, for root as for the unprivileged user
    assert outcome["value"] == -1


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_no_new_process_thread_or_program_even_as_root(uid, copy):
    # RLIMIT_NPROC stops forks only when not root; the filter stops them for root too
    attempts = {
        "fork": "import os\nos.fork()",
        "thread": "import threading\nthreading.Thread(target=print).start()",
        "subprocess": "import subprocess\nsubprocess.run(['/bin/true'])",
        "exec": "import os\nos.execv('/bin/true', ['true'])",
    }
    outcomes = {name: run_as(uid, copy, source) for name, source in attempts.items()}
    assert outcomes["fork"]["exception"] == "BlockingIOError"
    assert outcomes["thread"]["message"] == "RuntimeError at line 2: can't start new thread"
    assert outcomes["subprocess"]["exception"] == "BlockingIOError"
    assert outcomes["exec"]["exception"] == "PermissionError"


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_resource_limits_hold_under_the_jail(uid, copy):
    # The jail adds to the rlimits; each limit still ends the step with its own name. The
    # wall clock is generous except where it is the limit under test (a loaded machine).
    attempts = {
        "cpu": ("while True:\n    pass", 60),
        "memory": ("hoard = []\nwhile True:\n    hoard.append(' ' * 10**6)", 60),
        "wall": ("import time\ntime.sleep(30)", 1),
        "file": ("open('big', 'wb').write(b'x' * 2_000_000)", 60),
    }
    outcomes = {
        name: run_as(
            uid, copy, source, limits={"cpu_seconds": 1, "memory_mb": 64, "wall_seconds": wall}
        )
        for name, (source, wall) in attempts.items()
    }
    assert outcomes["cpu"]["limit"] == "cpu"
    assert outcomes["memory"]["limit"] == "memory"
    assert outcomes["wall"]["limit"] == "wall"
    assert "File too large" in outcomes["file"]["message"]


# --------------------------------------------------------------------------- orphans


def _dead(pid: int) -> bool:
    """Whether ``pid`` is gone, a zombie, or has SIGKILL pending: it runs no more user code
    (a loaded machine may take a while to schedule its exit)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return True
    pending = re.findall(r"^(?:SigPnd|ShdPnd):\s+([0-9a-f]+)$", status, re.MULTILINE)
    return any(int(mask, 16) & (1 << (signal.SIGKILL - 1)) for mask in pending)


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_killing_the_parent_kills_the_child(uid, copy):
    # Given a parent whose code step is sleeping, well within its wall-clock limit
    pid_file = copy.scratch / f"child-of-{uid}.pid"
    parent = start_parent(
        uid,
        copy,
        "import os, time\nopen(input, 'w').write(str(os.getpid()))\ntime.sleep(30)",
        input=str(pid_file),
        limits={"wall_seconds": 60},
    )
    child = None
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                break
            assert parent.poll() is None, parent.communicate()
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert f"PPid:\t{parent.pid}\n" in Path(f"/proc/{child}/status").read_text()
        # When the parent is killed from outside
        parent.kill()
        parent.wait()
        # Then the child is killed with it, long before its 30 s sleep would end (the bound
        # leaves a loaded machine time to deliver the signal and reap the child)
        deadline = time.monotonic() + 10.0
        while not _dead(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _dead(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if child is not None and not _dead(child):
            os.kill(child, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_runs_no_code(tmp_path):
    # Given a runner told that its parent is a process that has already ended
    gone = subprocess.Popen(["true"])
    gone.wait()
    marker = tmp_path / "ran"
    limits = Limits(cpu_seconds=1, memory_mb=128, wall_seconds=5, output_bytes=1000)
    code = f"open({str(marker)!r}, 'w').write('x')"
    request = {"code": code, "steps": {}, "trigger": {}, "input": None, "run": {}}
    request["limits"] = limits.to_dict()
    # When it starts
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", str(sandbox.RUNNER), str(gone.pid)],
        input=json.dumps(request).encode(),
        capture_output=True,
        env={},
    )
    # Then it exits at once, without a reply and without running the code
    assert done.returncode == jail.EXIT_ORPHANED
    assert done.stdout == b""
    assert not marker.exists()


# --------------------------------------------------------------------------- imports


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_layers_packages_are_unreachable_by_path_edits(uid, copy):
    # Given a layer directory holding boto3, and relayflow itself, both readable by the child
    attempts = {
        "sys.path": "import sys\nsys.path.append(input['layer'])\nimport boto3",
        "sys.path first": "import sys\nsys.path.insert(0, input['layer'])\nimport boto3",
        "relayflow": "import sys\nsys.path.append(input['shared'])\nimport relayflow.errors",
        "__path__": "import json\njson.__path__.append(input['layer'])\nimport json.boto3",
    }
    given = {"layer": str(copy.layer), "shared": str(copy.shared)}
    # When the code puts them on its path and imports them
    outcomes = {name: run_as(uid, copy, source, input=given) for name, source in attempts.items()}
    # Then nothing is found
    for name, outcome in outcomes.items():
        assert outcome.get("exception") == "ModuleNotFoundError", (name, outcome)


def test_the_real_boto3_of_the_venv_is_unreachable_by_path_edits():
    import boto3

    site = str(Path(boto3.__file__).parents[1])
    with pytest.raises(CodeError) as info:
        run_code(
            "import sys\nsys.path.append(input)\nimport boto3",
            steps={},
            trigger={},
            input=site,
            run={},
            limits=Limits(cpu_seconds=5, memory_mb=512, wall_seconds=20, output_bytes=1000),
        )
    assert info.value.details["exception"] == "ModuleNotFoundError"


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_the_standard_library_still_imports(uid, copy):
    source = (
        "import asyncio, ctypes, datetime, decimal, email.message, hashlib, json, sqlite3\n"
        "import statistics, urllib.parse, xml.etree.ElementTree, zoneinfo\n"
        "return [hashlib.sha256(b'').hexdigest()[:8], str(decimal.Decimal('1.10') * 2)]\n"
    )
    assert run_as(uid, copy, source)["value"] == ["e3b0c442", "2.20"]


def test_the_import_guard_never_searches_outside_the_standard_library(tmp_path):
    # Given Lambda's layout: site-packages inside the standard library's own directory
    stdlib = tmp_path / "lib" / "python3.12"
    (stdlib / "calendar_like").mkdir(parents=True)
    (stdlib / "calendar_like" / "__init__.py").write_text("")
    for place in (stdlib / "site-packages", tmp_path / "opt" / "python"):
        (place / "boto3").mkdir(parents=True)
        (place / "boto3" / "__init__.py").write_text("")
    (stdlib / "linked").symlink_to(tmp_path / "opt" / "python")
    guard = jail.StdlibOnly(PathFinder, [str(stdlib)])
    # Then the standard library is found, and nothing below site-packages or outside it is
    assert guard.find_spec("calendar_like") is not None
    assert guard.find_spec("boto3") is None
    assert guard.find_spec("boto3", [str(stdlib / "site-packages")]) is None
    assert guard.find_spec("boto3", [str(tmp_path / "opt" / "python")]) is None
    assert guard.find_spec("boto3", [str(stdlib / "linked")]) is None
    assert guard.find_spec("site-packages") is None


# --------------------------------------------------------------------------- failure causes


@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_a_signal_the_code_sends_itself_is_named_not_blamed_on_memory(uid, copy):
    outcome = run_as(uid, copy, "import os\nprint('bye')\nos.kill(os.getpid(), 9)")
    assert outcome["error"] == "Relayflow.CodeError"
    assert outcome["kind"] == "signal"
    assert outcome["message"] == "the code ended its own process with SIGKILL"
    assert outcome["stdout"] == "bye\n"


#: x86-64 machine code: ``mov eax, 0x40000029`` (socket in the x32 ABI); ``syscall``; ``ret``.
X32_SOCKET = """
import ctypes, mmap
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes([0xB8, 0x29, 0x00, 0x00, 0x40, 0x0F, 0x05, 0xC3]))
return ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
"""


@pytest.mark.skipif(MACHINE != "x86_64", reason="x86-64 machine code")
@pytest.mark.parametrize("uid", PARENT_UIDS)
def test_a_syscall_of_a_foreign_abi_is_a_seccomp_kill(uid, copy):
    outcome = run_as(uid, copy, X32_SOCKET)
    assert outcome["error"] == "Relayflow.CodeError"
    assert outcome["kind"] == "seccomp"
    assert "forbids (seccomp)" in outcome["message"]


RAW_SELF_KILL = "import ctypes, os\nctypes.CDLL(None).kill(os.getpid(), 9)"


def test_a_kill_from_outside_python_is_memory_only_when_the_oom_killer_struck(monkeypatch):
    # Given a child killed by SIGKILL that no Python hook saw, below its CPU limit
    counts = iter([41, 42])
    # When the kernel's OOM-kill count went up meanwhile, it is the memory limit
    monkeypatch.setattr(sandbox, "_oom_kills", lambda: next(counts))
    with pytest.raises(CodeLimitExceeded) as info:
        run_code(RAW_SELF_KILL, steps={}, trigger={}, input=None, run={}, limits=FAST)
    assert info.value.details["limit"] == "memory"
    # And when it did not, it is named as the signal, not guessed
    monkeypatch.setattr(sandbox, "_oom_kills", lambda: 41)
    with pytest.raises(CodeError) as crash:
        run_code(RAW_SELF_KILL, steps={}, trigger={}, input=None, run={}, limits=FAST)
    assert crash.value.details["kind"] == "crash"
    assert crash.value.message == "the code process ended without a result (signal SIGKILL)"


# --------------------------------------------------------------------------- the filter


def _run_filter(program: bytes, nr: int, arch: int, args: tuple[int, ...]) -> int:
    """Classic BPF as seccomp runs it, for the instructions the filter uses."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args, *[0] * (6 - len(args)))
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, a = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == jail.BPF_LD_W_ABS:
            a, pc = struct.unpack_from("=I", data, k)[0], pc + 1
        elif op == jail.BPF_JEQ_K:
            pc += 1 + (jt if a == k else jf)
        elif op == jail.BPF_JGE_K:
            pc += 1 + (jt if a >= k else jf)
        else:
            assert op == jail.BPF_RET_K
            return k


ALLOW, KILL, ERRNO = jail.SECCOMP_RET_ALLOW, jail.SECCOMP_RET_KILL_PROCESS, jail.SECCOMP_RET_ERRNO


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_program_decides_as_the_rules_say_on_both_architectures(machine):
    # Given the filter of process 4242 for each Lambda architecture, run by a BPF interpreter
    program = jail.filter_program(machine, 4242)
    arch = jail.AUDIT_ARCH[machine]
    column = 0 if machine == "x86_64" else 1

    def decide(name: str, *args: int, on: int = arch) -> int:
        return _run_filter(program, jail.SYSCALLS[name][column], on, args)

    # Then the network, the signals and the parent are refused, and the rest is allowed
    assert decide("socket", socket.AF_INET, 1) == ERRNO | 13
    assert decide("socket", socket.AF_NETLINK, 3) == ERRNO | 13
    assert decide("socket", socket.AF_UNIX, 1) == ALLOW
    assert decide("socketpair", socket.AF_INET6, 1) == ERRNO | 13
    assert decide("kill", 4242, 9) == ALLOW
    # The kernel reads a pid_t's low 32 bits only, and so does the filter
    assert decide("kill", (7 << 32) | 4242, 9) == ALLOW
    assert decide("kill", 1, 9) == ERRNO | 1
    assert decide("kill", 0, 9) == ERRNO | 1
    assert decide("kill", -4242 & 0xFFFFFFFF, 9) == ERRNO | 1
    assert decide("tgkill", 4241, 4241, 19) == ERRNO | 1
    assert decide("pidfd_send_signal", 3, 9) == ERRNO | 1
    assert decide("ptrace", 0x4206, 4241) == ERRNO | 1
    assert decide("prlimit64", 0, 7) == ALLOW
    assert decide("prlimit64", 4241, 7) == ERRNO | 1
    assert decide("fcntl", 3, jail.F_SETOWN, 4241) == ERRNO | 1
    assert decide("fcntl", 3, 3) == ALLOW
    assert decide("prctl", jail.PR_SET_PDEATHSIG, 0) == ERRNO | 1
    assert decide("prctl", 15, 0) == ALLOW
    assert decide("clone", 0x11) == ERRNO | 11
    assert decide("clone3", 0, 88) == ERRNO | 38
    assert decide("execve", 0) == ERRNO | 1
    assert decide("bpf", 0, 0, 72) == ERRNO | 1
    # Terminal ioctls that type into, steal or redirect a terminal are refused (the request is
    # an unsigned int: its low 32 bits); others, such as TCGETS, are allowed
    for request in (termios.TIOCSTI, termios.TIOCLINUX, termios.TIOCSCTTY, termios.TIOCCONS):
        assert decide("ioctl", 0, request, 0) == ERRNO | 1
        assert decide("ioctl", 0, (1 << 32) | request, 0) == ERRNO | 1
    assert decide("ioctl", 0, termios.TCGETS, 0) == ALLOW
    # A syscall of another ABI (i386, AArch32) kills the process
    assert decide("socket", socket.AF_UNIX, 1, on=0x40000003) == KILL
    assert decide("socket", socket.AF_UNIX, 1, on=0x40000028) == KILL
    # read(2) is allowed
    assert _run_filter(program, (0, 63)[column], arch, (0, 0, 0)) == ALLOW


def test_the_filter_refuses_x32_syscalls_on_x86_64():
    program = jail.filter_program("x86_64", 4242)
    assert _run_filter(program, 0x40000000 | 41, jail.AUDIT_ARCH["x86_64"], (1, 1)) == KILL


def test_an_unknown_architecture_fails_closed():
    with pytest.raises(jail.SetupError, match="no seccomp filter for the riscv64"):
        jail.filter_program("riscv64", 1)


def test_a_jail_that_cannot_be_set_up_runs_no_code(tmp_path, monkeypatch):
    # Given a runner whose jail knows no filter for this machine's architecture
    runner = tmp_path / "runner.py"
    runner.write_text(sandbox.RUNNER.read_text())
    source = (sandbox.RUNNER.parent / "jail.py").read_text()
    assert "\nAUDIT_ARCH = {" in source
    # "{} and {…}" evaluates to {}: the jail then knows no architecture
    (tmp_path / "jail.py").write_text(source.replace("\nAUDIT_ARCH = {", "\nAUDIT_ARCH = {} and {"))
    monkeypatch.setattr(sandbox, "RUNNER", runner)
    marker = tmp_path / "ran"
    # When a code step runs with it
    with pytest.raises(CodeError) as info:
        run_code(
            f"open({str(marker)!r}, 'w').write('x')",
            steps={},
            trigger={},
            input=None,
            run={},
            limits=FAST,
        )
    # Then it fails closed: a sandbox error, and the code never ran
    assert info.value.details == {"kind": "sandbox"}
    assert info.value.message == (
        f"the code sandbox could not be set up here: no seccomp filter for the {MACHINE} "
        "architecture"
    )
    assert not marker.exists()


HEADERS = {
    "x86_64": ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"],
    "aarch64": ["/usr/include/asm-generic/unistd.h"],
}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_syscall_numbers_match_the_kernel_headers(machine):
    header = next((Path(p) for p in HEADERS[machine] if Path(p).exists()), None)
    if header is None:
        pytest.skip("kernel headers (linux-libc-dev) are not installed")
    text = header.read_text()
    column = 0 if machine == "x86_64" else 1
    for name, numbers in jail.SYSCALLS.items():
        found = re.search(rf"^#define __NR(?:3264)?_{name}\s+(\d+)$", text, re.MULTILINE)
        assert (int(found.group(1)) if found else None) == numbers[column], name
