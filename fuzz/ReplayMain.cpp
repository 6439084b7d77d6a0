//===- ReplayMain.cpp - run a fuzz target on files, without libFuzzer -----===//
//
//   attn-parser-fuzz-replay PATH...
//
// Runs LLVMFuzzerTestOneInput once on every file named, or found (recursively, in
// sorted order) under every directory named, and prints how many ran. A finding
// aborts, as under libFuzzer. For builds without libFuzzer (GCC): the test suite
// replays the corpus with it.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto &entry : fs::recursive_directory_iterator(argv[i]))
        if (entry.is_regular_file())
          files.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "attn-parser-fuzz-replay: %s is neither a file nor a directory\n",
                   argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path &file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("attn-parser-fuzz-replay: %zu inputs\n", files.size());
  return files.empty() ? 1 : 0;
}
