# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "ATTN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attn_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "python", "runtime"]
config.substitutions.append(("%examples", os.path.join(config.attn_src_root, "examples")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["attn-opt", "attn-compile", "attn-seal", "attn-parser-fuzz-replay", "attn-pipeline-fuzz-replay"],
                                  [config.attn_tools_dir])

