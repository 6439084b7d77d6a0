//===- ReplayMain.cpp - run a fuzz target on files, without libFuzzer -----===//
//
//   attn-parser-fuzz-replay [--timeout=SECONDS] PATH...   (or attn-pipeline-fuzz-replay)
//
// Runs LLVMFuzzerTestOneInput once on every file named, or found (recursively, in
// sorted order) under every directory named, and prints how many ran. A finding
// aborts, as under libFuzzer; so does an input that runs longer than --timeout
// (libFuzzer's -timeout), naming it. For builds without libFuzzer (GCC): the test
// suite replays the corpus with it.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {
const char *tool = "";
std::string current; // the input running now, for the alarm handler

[[noreturn]] void timedOut(int) {
  // Only async-signal-safe calls: write and abort.
  const std::string message =
      std::string(tool) + ": timeout: " + current + " ran past --timeout\n";
  (void)!write(2, message.data(), message.size());
  std::abort();
}
} // namespace

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  tool = argv[0];
  if (const char *slash = std::strrchr(tool, '/'))
    tool = slash + 1;
  unsigned timeout = 0;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--timeout=", 10) == 0) {
      timeout = static_cast<unsigned>(std::strtoul(argv[i] + 10, nullptr, 10));
      continue;
    }
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto &entry : fs::recursive_directory_iterator(argv[i]))
        if (entry.is_regular_file())
          files.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "%s: %s is neither a file nor a directory\n", tool, argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (timeout)
    std::signal(SIGALRM, timedOut);
  for (const fs::path &file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    current = file.string();
    alarm(timeout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    alarm(0);
  }
  std::printf("%s: %zu inputs\n", tool, files.size());
  return files.empty() ? 1 : 0;
}
