"""A Spark standalone cluster on loopback for the benches, and the bridge shipped to it as a wheel.

The master and the worker are JVMs started with pyspark's own `bin/spark-class` (no Spark install
beyond the pip package), as in tests/spark/test_spark_cluster.py; the executors run in a JVM of
their own, so rows cross a process boundary as they would on a real cluster. The bridge reaches
the executors as a built hashbroker wheel (renamed .zip, which `spark.submit.pyFiles` accepts), put
ahead of the driver's own copy on the executors' path.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def build_wheel(out: Path) -> Path:
    """hashbroker as a pure-Python wheel, copied to a .zip name that Spark puts on the path
    (Spark takes only .zip/.egg/.jar py-files). Raises RuntimeError with pip's output if the
    build fails."""
    source = out / "src"  # a copy: building in place would leave build/ and *.egg-info behind
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".*cache", ".venv"),
    )
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        env=dict(os.environ, HASHBROKER_PURE="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    wheels = list(out.glob("hashbroker-*.whl"))
    if build.returncode != 0 or not wheels:
        raise RuntimeError(f"cannot build the hashbroker wheel: {build.stderr.strip()[-500:]}")
    shipped = out / (wheels[0].name + ".zip")
    shutil.copyfile(wheels[0], shipped)
    return shipped


@contextmanager
def spark_cluster(work: Path, cores: int = 2, memory: str = "2G") -> Iterator[str]:
    """Start a master and one worker with their files in `work`; yield the master URL; stop both."""
    import pyspark

    spark_home = Path(pyspark.__file__).resolve().parent
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(work),
        "SPARK_LOG_DIR": str(work),
        "SPARK_MASTER_WEBUI_PORT": str(free_port()),
        "SPARK_WORKER_WEBUI_PORT": str(free_port()),
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    spark_class = str(spark_home / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = []
    try:
        logs.append(open(work / "master.log", "w"))  # noqa: SIM115 - closed in finally
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        procs.append(
            subprocess.Popen(
                [*master, "--port", str(port)], env=env, stdout=logs[-1], stderr=subprocess.STDOUT
            )
        )
        wait_port(port, 120)
        logs.append(open(work / "worker.log", "w"))  # noqa: SIM115 - closed in finally
        worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"]
        worker += ["--cores", str(cores), "--memory", memory, "--work-dir", str(work), url]
        procs.append(subprocess.Popen(worker, env=env, stdout=logs[-1], stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        while "Successfully registered with master" not in (work / "worker.log").read_text():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "the worker did not register:\n" + (work / "worker.log").read_text()[-3000:]
                )
            time.sleep(0.5)
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


@contextmanager
def standalone_cluster(cores: int = 2, memory: str = "2G") -> Iterator[tuple[str, Path]]:
    """A cluster in a temporary directory; yield the master URL and the shipped wheel."""
    with tempfile.TemporaryDirectory(prefix="bench_spark_cluster_") as tmp:
        work = Path(tmp)
        wheel = build_wheel(work)
        with spark_cluster(work, cores, memory) as url:
            yield url, wheel
