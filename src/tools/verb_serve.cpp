// dspark serve: the OpenAI-compatible HTTP server (docs/SERVE.md). This file parses flags, loads
// the model and the drafter, wires src/serve together and handles SIGTERM / SIGINT.
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstring>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/threadpool.h"
#include "serve/http_server.h"
#include "serve/scheduler.h"
#include "tools/args.h"
#include "tools/common_flags.h"
#include "runtime/drafter_mount.h"
#include "runtime/drafter_factory.h"
#include "tools/spec_flags.h"
#include "runtime/loaded_model.h"
#include "runtime/registry.h"
#include "tools/verbs.h"

namespace dspark::tools {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

// The self-pipe of the shutdown signals (a signal handler can only touch async-signal-safe state).
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_shutdown_signal(int sig) {
  const char b = (char)sig;
  (void)!::write(g_signal_pipe[1], &b, 1);
}

}  // namespace

namespace {

// --cors-origin: comma-separated origins, each "*" or scheme://host[:port] (no path).
// A comma-separated flag value: its entries, spaces around them trimmed, empty ones dropped.
std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < list.size()) {
    const size_t comma = list.find(',', at);
    std::string o = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? list.size() : comma + 1;
    while (!o.empty() && o.back() == ' ') o.pop_back();
    while (!o.empty() && o.front() == ' ') o.erase(o.begin());
    if (!o.empty()) out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<std::string>> parse_origins(const std::string& list) {
  std::vector<std::string> out = split_list(list);
  for (const std::string& o : out) {
    const size_t scheme = o.find("://");
    const bool ok = o == "*" || ((o.rfind("http://", 0) == 0 || o.rfind("https://", 0) == 0) &&
                                 o.size() > scheme + 3 && o.find('/', scheme + 3) == std::string::npos);
    if (!ok) return Status::error("--cors-origin: '" + o + "' is not * or an origin like https://app.example[:port]");
  }
  return out;
}

Result<std::vector<std::string>> parse_allowed_hosts(const std::string& list) {
  std::vector<std::string> out = split_list(list);
  for (const std::string& h : out)
    if (h != "*" && (serve::host_name_of(h).empty() || h.find_first_of("/ @") != std::string::npos))
      return Status::error("--allowed-hosts: '" + h + "' is not * or a host name like api.example[:port]");
  return out;
}

std::string model_id(const std::string& spec, const std::string& path) {
  if (find_model(spec)) return spec;
  return std::filesystem::path(path).stem().string();
}

}  // namespace

int verb_serve(int argc, char** argv) {
  std::string model_spec = "gemma3-270m", cache, chat_template, host = "127.0.0.1", api_key, cors, allowed_hosts;
  SpecFlags spec_flags;
  int64_t port = 8080, parallel = 1, n_ctx = 4096, max_queue = 16, threads = ThreadPool::default_threads();
  int64_t max_body = 1 << 20, cache_mib = 1024, answer_cache_mib = 16, default_max_tokens = 512, prefill_chunk = 256;
  int64_t drain_s = 10, http_threads = 0;
  serve::HttpOptions http_defaults;
  int64_t max_connections = http_defaults.max_connections, max_connections_per_ip = http_defaults.max_connections_per_ip;
  int64_t head_timeout_s = http_defaults.head_timeout_s, min_body_rate = http_defaults.min_body_rate;
  bool verbose = false, no_batch = false;
  Args args("dspark serve [--model M] [--draft-model D | --draft-kind K | --no-spec] [--host H] [--port P]\n"
            "       [--api-key KEY] [--parallel N] [--ctx N] [--max-queue Q]",
            "Serve the model over an OpenAI-compatible HTTP API: POST /v1/chat/completions and\n"
            "/v1/completions (streamed or not), GET /v1/models, /health, /stats, /metrics (Prometheus)\n"
            "and a chat page at /. Every slot decodes speculatively with its own drafter (default: the\n"
            "model's shipped DSpark drafter, else n-gram); answers equal serial decoding at temperature 0.\n"
            "See docs/SERVE.md.");
  std::string backend, kernel_plan = "auto";
  add_model_flags(args, &model_spec, &cache, &chat_template);
  add_backend_flag(args, &backend, &kernel_plan);
  add_spec_flags(args, &spec_flags);
  args.add("--host", &host, "address to listen on (default: localhost only)");
  args.add("--port", &port, "TCP port (0: any free port, printed at start)", 0, 65535);
  args.add("--api-key", &api_key, "require 'Authorization: Bearer KEY' on /v1/*, /stats and /metrics");
  args.add("--cors-origin", &cors,
           "allow browser pages from these origins (comma-separated, e.g. https://app.example; * = any) to call "
           "the API: CORS headers + OPTIONS preflight (default: none, browsers block cross-origin reads)");
  args.add("--allowed-hosts", &allowed_hosts,
           "Host names answered besides localhost, 127.0.0.1, [::1] and the --host address (comma-separated, any "
           "port; * = any Host); others get HTTP 421, which stops DNS-rebinding pages from reading the API");
  args.add("--parallel", &parallel, "generation slots (each its own KV cache and drafter)", 1, 256);
  args.add("--ctx", &n_ctx, "context size in tokens per slot", 16, 1 << 20);
  args.add("--max-queue", &max_queue, "requests waiting for a slot at most; more get HTTP 429", 0, 1 << 20);
  add_threads_flag(args, &threads);
  args.add("--max-body", &max_body, "largest request body in bytes (more: HTTP 413)", 1024, 1ll << 30);
  args.add("--cache-mib", &cache_mib, "prompt-cache budget in MiB (KV kept per slot for prefix reuse); 0 = off", 0,
           1 << 20);
  args.add("--answer-cache-mib", &answer_cache_mib,
           "memory for the answers already served, which every slot's drafter continues where the request's own\n"
           "prompt lookup finds nothing (repeated questions, templates, agent loops; oldest answers go first;\n"
           "docs/SERVE.md); 0 = off", 0, 1 << 16);
  args.add("--default-max-tokens", &default_max_tokens, "tokens generated when a request sets no max_tokens", 1,
           1 << 20);
  args.add("--prefill-chunk", &prefill_chunk, "prompt tokens per scheduling step (fairness between slots)", 1, 1 << 20);
  args.add("--drain-timeout", &drain_s, "seconds SIGTERM waits for running requests before cancelling them", 0, 3600);
  args.add("--http-threads", &http_threads,
           "requests handled at once, one thread each while it runs (a stream holds one; idle and slow connections "
           "hold none; default: 4 x (parallel + max-queue) + 32); more get 503",
           0, 4096);
  args.add("--max-connections", &max_connections, "open connections in all; more get 503", 1, 1 << 20);
  args.add("--max-connections-per-ip", &max_connections_per_ip,
           "open connections from one client address (0: no limit; raise it behind a proxy); more get 503", 0,
           1 << 20);
  args.add("--head-timeout", &head_timeout_s,
           "seconds a request's header block may take from its first byte, however it trickles in (408 after)", 1,
           3600);
  args.add("--min-body-rate", &min_body_rate,
           "bytes/s a request body must average: it must arrive within --head-timeout + length / rate (408 after)", 1,
           1ll << 30);
  args.add_flag("--no-batch", &no_batch, "verify each slot's round in its own forward (default: one forward_multi)");
  args.add_flag("--verbose,-v", &verbose, "log one line per HTTP request; at start-up, the backend and the kernel each weight type runs on");
  if (Status st = args.parse(argc, argv, 2); !st) {
    std::fprintf(stderr, "dspark serve: %s\n", st.message().c_str());
    return kExitBadInput;
  }
  if (args.help_requested()) { std::printf("%s", args.help().c_str()); return 0; }
  if (Status st = check_spec_flags(spec_flags); !st) {
    std::fprintf(stderr, "dspark serve: %s\n", st.message().c_str());
    return kExitBadInput;
  }
  if (!args.positional().empty()) {
    std::fprintf(stderr, "dspark serve: unexpected argument '%s'\n", args.positional()[0].c_str());
    return kExitBadInput;
  }
  auto cors_origins = parse_origins(cors);
  if (!cors_origins) { std::fprintf(stderr, "dspark serve: %s\n", cors_origins.message().c_str()); return kExitBadInput; }
  auto hosts = parse_allowed_hosts(allowed_hosts);
  if (!hosts) { std::fprintf(stderr, "dspark serve: %s\n", hosts.message().c_str()); return kExitBadInput; }

  auto lm = load_model(model_spec, cache, chat_template,
                       BackendFlags{backend, kernel_plan, (int)threads, model::SessionOptions{}.max_batch});
  if (!lm) { std::fprintf(stderr, "dspark serve: %s\n", lm.message().c_str()); return kExitBadInput; }
  if (verbose) std::fputs(runtime::kernel_report(*lm->model).c_str(), stderr);
  const model::ModelConfig& cfg = lm->model->config();
  if (n_ctx > cfg.n_ctx_train) {
    std::fprintf(stderr, "dspark serve: --ctx %lld exceeds the model's training context %lld\n", (long long)n_ctx,
                 (long long)cfg.n_ctx_train);
    return kExitBadInput;
  }

  // Shutdown signals: a handler (on whichever thread the kernel picks; libraries such as OpenBLAS
  // start threads before main, so blocking the signals here cannot cover every thread) writes one
  // byte to a pipe; one thread waits on the pipe and drains.
  if (::pipe(g_signal_pipe) != 0) {
    std::fprintf(stderr, "dspark serve: pipe: %s\n", std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_shutdown_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  ThreadPool pool((int)threads);

  // Drafter: mounted once (runtime/drafter_mount.h); every slot forks its own state over the same
  // weights. The mount outlives the scheduler (declared before it).
  serve::DrafterInfo dinfo;
  int max_gamma = 0;
  spec::GovernorConfig governor;
  serve::DrafterFactory factory;
  std::unique_ptr<runtime::MountedDrafter> mount;
  if (const std::optional<spec::SpecConfig> want = effective_spec(spec_flags, lm->path, /*fallback_ngram=*/true)) {
    auto m = runtime::mount_drafter(
        *want, {.n_ctx = n_ctx, .cache_dir = resolve_cache_dir(cache), .verify_ms = {}, .verbose = verbose}, *lm, &pool);
    if (!m) { std::fprintf(stderr, "dspark serve: %s\n", m.message().c_str()); return kExitBadInput; }
    mount = std::move(m).value();
    const spec::SpecConfig& dopt = mount->config;
    dinfo = {mount->kind(), dopt.model.empty() ? dopt.suffix_index : dopt.model, mount->gamma(), dopt.threshold};
    max_gamma = std::max(mount->gamma(), mount->drafter().max_draft());
    governor = mount->bundle.governor;
    factory = [m = mount.get()]() -> Result<std::unique_ptr<spec::Drafter>> { return m->fork(); };
  }

  serve::Metrics metrics;
  const serve::SchedulerConfig scfg{.n_slots = (int)parallel,
                                    .max_queue = (int)max_queue,
                                    .n_ctx = n_ctx,
                                    .max_batch = 512,
                                    .prefill_chunk = prefill_chunk,
                                    .cache_bytes = (size_t)cache_mib << 20,
                                    .batch_rounds = !no_batch,
                                    .verify_ms = governor.verify_ms,
                                    .gate = {.enabled = governor.enabled},
                                    .answer_cache_bytes = (size_t)answer_cache_mib << 20};
  auto sched = serve::Scheduler::create(*lm->model, *lm->tok, scfg, factory, &pool, &metrics);
  if (!sched) { std::fprintf(stderr, "dspark serve: %s\n", sched.message().c_str()); return kExitBadInput; }

  serve::ServedModel served{.id = model_id(model_spec, lm->path),
                            .aliases = {model_spec, lm->path, std::filesystem::path(lm->path).filename().string()},
                            .n_ctx = n_ctx,
                            .default_max_tokens = default_max_tokens,
                            .has_drafter = !dinfo.kind.empty(),
                            .default_gamma = dinfo.gamma,
                            .max_gamma = max_gamma,
                            .governor = governor,
                            .chat = lm->chat};
  serve::HttpOptions hopt{.host = host,
                          .port = (int)port,
                          .api_key = api_key,
                          .cors_origins = *cors_origins,
                          .allowed_hosts = *hosts,
                          .max_body_bytes = (size_t)max_body,
                          .http_threads = (int)(http_threads > 0 ? http_threads : 4 * (parallel + max_queue) + 32),
                          .max_connections = (int)max_connections,
                          .max_connections_per_ip = (int)max_connections_per_ip,
                          .head_timeout_s = (int)head_timeout_s,
                          .min_body_rate = min_body_rate,
                          .log_requests = verbose};
  serve::HttpServer server(hopt, served, dinfo, *lm->tok, **sched, metrics);
  if (Status st = server.bind(); !st) {
    std::fprintf(stderr, "dspark serve: %s\n", st.message().c_str());
    return 1;
  }

  std::atomic<bool> signalled{false};
  std::thread sig_thread([&] {
    int sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // woken by main after the server stopped on its own
    signalled = true;
    std::fprintf(stderr, "dspark serve: signal %d, draining (up to %llds) then exiting\n", sig, (long long)drain_s);
    server.set_draining();
    (*sched)->shutdown(std::chrono::seconds(drain_s));
    // Every job has now finished or been cancelled; let their responses be written to the end (a
    // stream's last event, [DONE] and closing chunk) before stop() cuts the connections.
    constexpr auto kFlush = std::chrono::seconds(3);
    if (!server.wait_responses(kFlush))
      std::fprintf(stderr, "dspark serve: some responses were still being written after %llds; closing them\n",
                   (long long)std::chrono::duration_cast<std::chrono::seconds>(kFlush).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the last non-streamed bodies
    server.stop();
  });

  std::fprintf(stderr, "dspark serve: listening on http://%s:%d | model %s (%s) | ctx %lld | %lld slot(s) | drafter %s\n",
               host.c_str(), server.port(), served.id.c_str(), lm->path.c_str(), (long long)n_ctx,
               (long long)parallel,
               dinfo.kind.empty() ? "none" : (dinfo.kind + ", " + std::to_string(dinfo.gamma) + " draft tokens").c_str());
  std::fflush(stderr);
  server.run();
  if (!signalled) {
    const char zero = 0;
    (void)!::write(g_signal_pipe[1], &zero, 1);
  }
  sig_thread.join();
  (*sched)->shutdown(std::chrono::milliseconds(0));
  std::fprintf(stderr, "dspark serve: stopped\n");
  return 0;
}

}  // namespace dspark::tools
