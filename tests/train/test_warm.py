"""The warm launch's server, started where the temp folder is too long for a Unix socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mlflow_roofline.train.warm import SHORT_TEMP_FOLDERS, SOCKET_PATH_MAX_BYTES

START_AND_FORK = """
import json, multiprocessing, multiprocessing.util, os, tempfile
from mlflow_roofline.train.warm import WarmServer
server = WarmServer().start()
child = server.context.Process(target=os.getpid)
child.start()
child.join(120)
print(json.dumps({"exitcode": child.exitcode, "socket_folder": multiprocessing.util.get_temp_dir(),
                  "temp_folder": tempfile.gettempdir()}))
"""


def test_a_long_tmpdir_gets_the_server_socket_a_short_folder_and_keeps_the_rest(tmp_path: Path) -> None:
    long_tmpdir = tmp_path / ("d" * (SOCKET_PATH_MAX_BYTES - len(str(tmp_path))))
    long_tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(long_tmpdir)}
    done = subprocess.run([sys.executable, "-c", START_AND_FORK], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    started = json.loads(done.stdout.strip().splitlines()[-1])
    assert started["exitcode"] == 0  # the server started and forked a process
    assert started["temp_folder"] == str(long_tmpdir)  # the process's temp folder is still the user's
    assert not started["socket_folder"].startswith(str(long_tmpdir))
    assert os.path.dirname(started["socket_folder"]) in SHORT_TEMP_FOLDERS
    assert not os.path.exists(started["socket_folder"])  # removed at the process's exit
