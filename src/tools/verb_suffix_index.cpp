// dspark suffix-index build: the suffix index of draft-kind suffix (spec/suffix_index.h) from
// regen token-id files (train/regen_ids.h; .xz ones are decompressed with the xz tool).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/progress.h"
#include "core/sha256.h"
#include "runtime/loaded_model.h"
#include "speculative/suffix_index.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "tools/verbs.h"
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

std::string file_sha256(const std::string& path) {
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

// --ids values: comma-separated lists, the flag repeated.
std::vector<std::string> split_ids_flags(const std::vector<std::string>& flags) {
  std::vector<std::string> paths;
  for (const std::string& v : flags)
    for (size_t from = 0; from <= v.size();) {
      size_t to = v.find(',', from);
      if (to == std::string::npos) to = v.size();
      if (to > from) paths.push_back(v.substr(from, to - from));
      from = to + 1;
    }
  return paths;
}

}  // namespace

int verb_suffix_index(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  std::string model_spec = "gemma3-270m", cache, out;
  std::vector<std::string> ids_flags;
  bool json = false, with_prompts = false;
  Args args("dspark suffix-index build --ids FILE[,FILE...] -m MODEL -o OUT.sfx [--with-prompts] [--json]",
            "Build the suffix index of draft-kind suffix (docs/SPECULATION.md, \"Retrieval drafting\") from\n"
            "regen token-id files (dspark-regen-ids-v1, .xz ones decompressed with xz): every answer's tokens\n"
            "(with --with-prompts the chat-templated prompt before it), in the order given, as one stream\n"
            "with a suffix array. The file records the model's tokenizer fingerprint; the same inputs give\n"
            "the same bytes.");
  add_model_flags(args, &model_spec, &cache);
  args.add_list("--ids", &ids_flags, "token-id files, comma-separated or the flag repeated, in order");
  args.add("--out,-o", &out, "the index file to write");
  args.add_flag("--with-prompts", &with_prompts, "index the prompt tokens too, not only the answers");
  add_json_flag(args, &json, "print one JSON object (file, bytes, sha256, counts, seconds)");
  auto fail = [](const std::string& m, int code = kExitBadInput) {
    std::fprintf(stderr, "dspark suffix-index%s\n", m.c_str());
    return code;
  };
  const bool help = argc >= 3 && (std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h");
  if (help) { std::printf("%s", args.help().c_str()); return 0; }
  if (argc < 3 || std::string(argv[2]) != "build") return fail(": expected 'build' (dspark suffix-index --help)");
  if (Status st = args.parse(argc, argv, 3); !st) return fail(": " + st.message());
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  const std::vector<std::string> ids_paths = split_ids_flags(ids_flags);
  if (ids_paths.empty() || out.empty()) return fail(" build: needs --ids FILE[,FILE...] and --out FILE");
  const auto t0 = Clock::now();
  auto lm = runtime::load_model(model_spec, cache);
  if (!lm) return fail(" build: " + lm.message());
  auto s = read_stream(ids_paths, *lm, with_prompts);
  if (!s) return fail(" build: " + s.message());
  const uint64_t n_tokens = s->stream.size() - s->n_seqs;
  ProgressBar bar("suffix-index", n_tokens, " suffixes");
  bar.update(0);
  const auto sa = speculative::build_suffix_array(s->stream, [&](uint64_t done) { bar.update(done); });
  bar.update(n_tokens);
  const nlohmann::json meta = {{"format", "dspark-suffix-index-v1"}, {"model", fs::path(lm->path).filename().string()},
                               {"sources", s->sources}, {"with_prompts", with_prompts}};
  if (Status st = speculative::write_suffix_index(out, s->stream, sa, lm->tok->n_vocab(), speculative::tokenizer_fingerprint(*lm->tok),
                                           meta.dump());
      !st)
    return fail(" build: " + st.message(), 1);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const uint64_t bytes = fs::file_size(out);
  const std::string sha = file_sha256(out);
  if (json)
    std::printf("%s\n", nlohmann::json{{"file", out}, {"bytes", bytes}, {"sha256", sha}, {"sequences", s->n_seqs},
                                       {"tokens", n_tokens}, {"with_prompts", with_prompts}, {"seconds", secs}}
                            .dump()
                            .c_str());
  else
    std::printf("%s: %llu sequences, %llu tokens, %.1f MB, %.1f s\nsha256 %s\n", out.c_str(), (unsigned long long)s->n_seqs,
                (unsigned long long)n_tokens, (double)bytes / 1e6, secs, sha.c_str());
  return 0;
}

}  // namespace dspark::tools
