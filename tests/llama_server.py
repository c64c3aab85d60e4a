"""llama-cpp-python's own OpenAI-compatible server, as a user starts it (``python -m
llama_cpp.server``), for the tests that run tao against a real third-party server. On a CPU
with AMX the server would die on its first prompt as tao's own process did (issue 23): it gets
the same guard first, the AMX permission refused, so the test measures the protocol."""

import runpy
import sys

from tao.models import llama_cpu

if "amx_int8" in llama_cpu.cpu_flags():
    llama_cpu.deny_amx()
sys.argv = ["llama_cpp.server", *sys.argv[1:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
