#include "tools/suffix_index_build.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/progress.h"
#include "core/sha256.h"
#include "speculative/suffix_index.h"
#include "train/regen_ids.h"

extern char** environ;

namespace dspark::tools {

namespace {

namespace fs = std::filesystem;

// `xz -dc path` into a new temporary file; its path.
Result<std::string> unxz_to_temp(const std::string& path) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/dspark-ids-XXXXXX";
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) return Status::error("cannot create a temporary file for " + path);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  const char* argv[] = {"xz", "-dc", "--", path.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "xz", &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fd);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::remove(tmpl.c_str());
    return Status::error(path + (rc != 0 ? ": cannot run xz to decompress it" : ": xz could not decompress it"));
  }
  return tmpl;
}

}  // namespace

Result<train::IdsFile> read_ids_any(const std::string& path, int64_t n_vocab) {
  if (!fs::is_regular_file(path)) return Status::error(path + ": no such ids file");
  if (path.size() < 3 || path.compare(path.size() - 3, 3, ".xz") != 0) return train::read_ids_file(path, n_vocab);
  auto tmp = unxz_to_temp(path);
  if (!tmp) return tmp.status();
  auto f = train::read_ids_file(*tmp, n_vocab);
  std::remove(tmp->c_str());
  if (!f) return Status::error(path + " (decompressed): " + f.message());
  return f;
}

namespace {

std::string file_sha256_impl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), (std::streamsize)buf.size()) || in.gcount() > 0) h.update(buf.data(), (size_t)in.gcount());
  return h.hex_digest();
}

// The answers (with prompts: whole sequences) of the ids files, in order, as one stream, each
// sequence followed by the separator; sources: per file, its sequences and tokens.
struct IndexStream {
  std::vector<int32_t> stream;
  nlohmann::json sources = nlohmann::json::array();
  uint64_t n_seqs = 0;
};

Result<IndexStream> read_stream(const std::vector<std::string>& ids_paths, const runtime::LoadedModel& lm,
                                bool with_prompts) {
  const int32_t n_vocab = lm.tok->n_vocab();
  const std::string model_file = fs::path(lm.path).filename().string();
  IndexStream s;
  for (const std::string& p : ids_paths) {
    auto f = read_ids_any(p, n_vocab);
    if (!f) return f.status();
    const auto settings = nlohmann::json::parse(f->settings_json, nullptr, false);
    if (settings.is_object() && settings.contains("model") && settings["model"] != model_file)
      std::fprintf(stderr, "dspark suffix-index build: note: %s holds answers of %s, the target is %s\n", p.c_str(),
                   settings["model"].dump().c_str(), model_file.c_str());
    uint64_t tokens = 0;
    for (const train::IdsSeq& q : f->seqs) {
      const size_t from = with_prompts ? 0 : (size_t)q.prompt_len;
      if (from >= q.tokens.size()) continue;  // no answer
      s.stream.insert(s.stream.end(), q.tokens.begin() + (int64_t)from, q.tokens.end());
      s.stream.push_back(speculative::kSuffixSeparator);
      tokens += q.tokens.size() - from;
      ++s.n_seqs;
    }
    s.sources.push_back({{"file", fs::path(p).filename().string()}, {"sequences", f->seqs.size()}, {"tokens", tokens}});
  }
  if (s.stream.size() >= (1ull << 32))
    return Status::error(std::to_string(s.stream.size()) + " tokens; an index holds fewer than 2^32");
  return s;
}

}  // namespace

std::string file_sha256(const std::string& path) { return file_sha256_impl(path); }

Result<SuffixIndexBuild> build_suffix_index(const std::vector<std::string>& ids_paths, const runtime::LoadedModel& lm,
                                            bool with_prompts, const std::string& out, bool* bad_input) {
  auto s = read_stream(ids_paths, lm, with_prompts);
  if (bad_input) *bad_input = !s;
  if (!s) return s.status();
  SuffixIndexBuild b;
  b.sequences = s->n_seqs;
  b.tokens = s->stream.size() - s->n_seqs;
  ProgressBar bar("suffix-index", b.tokens, " suffixes");
  bar.update(0);
  const auto sa = speculative::build_suffix_array(s->stream, [&](uint64_t done) { bar.update(done); });
  bar.update(b.tokens);
  const nlohmann::json meta = {{"format", "dspark-suffix-index-v1"}, {"model", fs::path(lm.path).filename().string()},
                               {"sources", s->sources}, {"with_prompts", with_prompts}};
  DSPARK_RETURN_IF_ERROR(speculative::write_suffix_index(out, s->stream, sa, lm.tok->n_vocab(),
                                                         speculative::tokenizer_fingerprint(*lm.tok), meta.dump()));
  std::error_code ec;
  b.bytes = fs::file_size(out, ec);
  b.sha256 = file_sha256(out);
  return b;
}

}  // namespace dspark::tools
