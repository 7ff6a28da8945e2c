// dspark serve: the OpenAI-compatible HTTP server (docs/SERVE.md). This file parses flags, loads
// the model, mounts the drafter (runtime::mount_drafter), wires src/serve together and handles
// SIGTERM / SIGINT.
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

struct ServeFlags {
  std::string model_spec = "gemma3-270m", cache, chat_template, host = "127.0.0.1", api_key, cors, allowed_hosts;
  std::string backend, kernel_plan = "auto";
  SpecFlags spec_flags;
  int64_t port = 8080, parallel = 1, n_ctx = 4096, max_queue = 16, threads = ThreadPool::default_threads();
  int64_t max_body = 1 << 20, cache_mib = 1024, answer_cache_mib = 16, default_max_tokens = 512, prefill_chunk = 256;
  int64_t drain_s = 10, http_threads = 0;
  int64_t max_connections = serve::HttpOptions{}.max_connections;
  int64_t max_connections_per_ip = serve::HttpOptions{}.max_connections_per_ip;
  int64_t head_timeout_s = serve::HttpOptions{}.head_timeout_s, min_body_rate = serve::HttpOptions{}.min_body_rate;
  bool verbose = false, no_batch = false;
  std::vector<std::string> cors_origins, hosts;  // parsed from cors / allowed_hosts
};

void add_connection_flags(Args& args, ServeFlags* f) {
  args.add("--http-threads", &f->http_threads,
           "requests handled at once, one thread each while it runs (a stream holds one; idle and slow connections "
           "hold none; default: 4 x (parallel + max-queue) + 32); more get 503",
           0, 4096);
  args.add("--max-connections", &f->max_connections, "open connections in all; more get 503", 1, 1 << 20);
  args.add("--max-connections-per-ip", &f->max_connections_per_ip,
           "open connections from one client address (0: no limit; raise it behind a proxy); more get 503", 0,
           1 << 20);
  args.add("--head-timeout", &f->head_timeout_s,
           "seconds a request's header block may take from its first byte, however it trickles in (408 after)", 1,
           3600);
  args.add("--min-body-rate", &f->min_body_rate,
           "bytes/s a request body must average: it must arrive within --head-timeout + length / rate (408 after)", 1,
           1ll << 30);
}

void add_serve_flags(Args& args, ServeFlags* f) {
  add_model_flags(args, &f->model_spec, &f->cache, &f->chat_template);
  add_backend_flag(args, &f->backend, &f->kernel_plan);
  add_spec_flags(args, &f->spec_flags);
  args.add("--host", &f->host, "address to listen on (default: localhost only)");
  args.add("--port", &f->port, "TCP port (0: any free port, printed at start)", 0, 65535);
  args.add("--api-key", &f->api_key, "require 'Authorization: Bearer KEY' on /v1/*, /stats and /metrics");
  args.add("--cors-origin", &f->cors,
           "allow browser pages from these origins (comma-separated, e.g. https://app.example; * = any) to call "
           "the API: CORS headers + OPTIONS preflight (default: none, browsers block cross-origin reads)");
  args.add("--allowed-hosts", &f->allowed_hosts,
           "Host names answered besides localhost, 127.0.0.1, [::1] and the --host address (comma-separated, any "
           "port; * = any Host); others get HTTP 421, which stops DNS-rebinding pages from reading the API");
  args.add("--parallel", &f->parallel, "generation slots (each its own KV cache and drafter)", 1, 256);
  args.add("--ctx", &f->n_ctx, "context size in tokens per slot", 16, 1 << 20);
  args.add("--max-queue", &f->max_queue, "requests waiting for a slot at most; more get HTTP 429", 0, 1 << 20);
  add_threads_flag(args, &f->threads);
  args.add("--max-body", &f->max_body, "largest request body in bytes (more: HTTP 413)", 1024, 1ll << 30);
  args.add("--cache-mib", &f->cache_mib, "prompt-cache budget in MiB (KV kept per slot for prefix reuse); 0 = off", 0,
           1 << 20);
  args.add("--answer-cache-mib", &f->answer_cache_mib,
           "memory for the answers already served, which every slot's drafter continues where the request's own\n"
           "prompt lookup finds nothing (repeated questions, templates, agent loops; oldest answers go first;\n"
           "docs/SERVE.md); 0 = off", 0, 1 << 16);
  args.add("--default-max-tokens", &f->default_max_tokens, "tokens generated when a request sets no max_tokens", 1,
           1 << 20);
  args.add("--prefill-chunk", &f->prefill_chunk, "prompt tokens per scheduling step (fairness between slots)", 1,
           1 << 20);
  args.add("--drain-timeout", &f->drain_s, "seconds SIGTERM waits for running requests before cancelling them", 0, 3600);
  add_connection_flags(args, f);
  args.add_flag("--no-batch", &f->no_batch, "verify each slot's round in its own forward (default: one forward_multi)");
  args.add_flag("--verbose,-v", &f->verbose,
                "log one line per HTTP request; at start-up, the backend and the kernel each weight type runs on");
}

// What the flags alone can tell, before a model is loaded.
Status check_serve_flags(const Args& args, ServeFlags& f) {
  DSPARK_RETURN_IF_ERROR(check_spec_flags(f.spec_flags));
  if (!args.positional().empty()) return Status::error("unexpected argument '" + args.positional()[0] + "'");
  auto origins = parse_origins(f.cors);
  if (!origins) return origins.status();
  auto hosts = parse_allowed_hosts(f.allowed_hosts);
  if (!hosts) return hosts.status();
  f.cors_origins = *origins;
  f.hosts = *hosts;
  return Status::ok();
}

// The drafter every slot forks (none with --no-spec), mounted once over the shared weights.
struct ServeDrafter {
  std::unique_ptr<runtime::MountedDrafter> mount;  // must outlive the scheduler
  serve::DrafterInfo info;
  int max_gamma = 0;
  speculative::GovernorConfig governor;
  serve::DrafterFactory factory;
};

Result<ServeDrafter> mount_serve_drafter(const ServeFlags& f, const LoadedModel& lm, ThreadPool* pool) {
  ServeDrafter d;
  auto want = effective_spec(f.spec_flags, lm, resolve_cache_dir(f.cache), /*fallback_ngram=*/true);
  if (!want) return want.status();
  if (!*want) return d;
  auto m = runtime::mount_drafter(
      **want, {.n_ctx = f.n_ctx, .cache_dir = resolve_cache_dir(f.cache), .verify_ms = {}, .verbose = f.verbose, .note = print_note}, lm, pool);
  if (!m) return m.status();
  d.mount = std::move(m).value();
  const speculative::SpecConfig& c = d.mount->config;
  d.info = {d.mount->kind(), c.model.empty() ? c.suffix_index : c.model, d.mount->gamma(), c.threshold};
  d.max_gamma = std::max(d.mount->gamma(), d.mount->drafter().max_gamma());
  d.governor = d.mount->bundle.governor;
  d.factory = [m = d.mount.get()]() -> Result<std::unique_ptr<speculative::Drafter>> { return m->fork(); };
  return d;
}

serve::SchedulerConfig scheduler_config(const ServeFlags& f, const ServeDrafter& d) {
  return {.n_slots = (int)f.parallel,
          .max_queue = (int)f.max_queue,
          .n_ctx = f.n_ctx,
          .max_batch = 512,
          .prefill_chunk = f.prefill_chunk,
          .cache_bytes = (size_t)f.cache_mib << 20,
          .batch_rounds = !f.no_batch,
          .verify_ms = d.governor.verify_ms,
          .gate = {.enabled = d.governor.enabled},
          .answer_cache_bytes = (size_t)f.answer_cache_mib << 20};
}

serve::ServedModel served_model(const ServeFlags& f, const LoadedModel& lm, const ServeDrafter& d) {
  return {.id = model_id(f.model_spec, lm.path),
          .aliases = {f.model_spec, lm.path, std::filesystem::path(lm.path).filename().string()},
          .n_ctx = f.n_ctx,
          .default_max_tokens = f.default_max_tokens,
          .has_drafter = !d.info.kind.empty(),
          .default_gamma = d.info.gamma,
          .max_gamma = d.max_gamma,
          .governor = d.governor,
          .chat = lm.chat};
}

serve::HttpOptions http_options(const ServeFlags& f) {
  return {.host = f.host,
          .port = (int)f.port,
          .api_key = f.api_key,
          .cors_origins = f.cors_origins,
          .allowed_hosts = f.hosts,
          .max_body_bytes = (size_t)f.max_body,
          .http_threads = (int)(f.http_threads > 0 ? f.http_threads : 4 * (f.parallel + f.max_queue) + 32),
          .max_connections = (int)f.max_connections,
          .max_connections_per_ip = (int)f.max_connections_per_ip,
          .head_timeout_s = (int)f.head_timeout_s,
          .min_body_rate = f.min_body_rate,
          .log_requests = f.verbose};
}

// Shutdown signals: a handler (on whichever thread the kernel picks; libraries such as OpenBLAS
// start threads before main, so blocking the signals here cannot cover every thread) writes one
// byte to a pipe; one thread waits on the pipe and drains.
Status install_shutdown_signals() {
  if (::pipe(g_signal_pipe) != 0) return Status::error(std::string("pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_shutdown_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return Status::ok();
}

// Serves until a shutdown signal: then drains (up to drain_s), lets the last responses be written
// and stops the server.
void serve_until_signalled(serve::HttpServer& server, serve::Scheduler& sched, int64_t drain_s) {
  std::atomic<bool> signalled{false};
  std::thread sig_thread([&] {
    int sig = 0;
    while (::read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig == 0) return;  // woken by main after the server stopped on its own
    signalled = true;
    std::fprintf(stderr, "dspark serve: signal %d, draining (up to %llds) then exiting\n", sig, (long long)drain_s);
    server.set_draining();
    sched.shutdown(std::chrono::seconds(drain_s));
    // Every job has now finished or been cancelled; let their responses be written to the end (a
    // stream's last event, [DONE] and closing chunk) before stop() cuts the connections.
    constexpr auto kFlush = std::chrono::seconds(3);
    if (!server.wait_responses(kFlush))
      std::fprintf(stderr, "dspark serve: some responses were still being written after %llds; closing them\n",
                   (long long)std::chrono::duration_cast<std::chrono::seconds>(kFlush).count());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the last non-streamed bodies
    server.stop();
  });
  server.run();
  if (!signalled) {
    const char zero = 0;
    (void)!::write(g_signal_pipe[1], &zero, 1);
  }
  sig_thread.join();
  sched.shutdown(std::chrono::milliseconds(0));
}

}  // namespace

int verb_serve(int argc, char** argv) {
  ServeFlags f;
  Args args("dspark serve [--model M] [--draft-model D | --draft-kind K | --no-spec] [--host H] [--port P]\n"
            "       [--api-key KEY] [--parallel N] [--ctx N] [--max-queue Q]",
            "Serve the model over an OpenAI-compatible HTTP API: POST /v1/chat/completions and\n"
            "/v1/completions (streamed or not), GET /v1/models, /health, /stats, /metrics (Prometheus)\n"
            "and a chat page at /. Every slot decodes speculatively with its own drafter (default: the\n"
            "model's shipped default: drafters/<name>, else n-gram); answers equal serial decoding at temperature 0.\n"
            "See docs/SERVE.md.");
  add_serve_flags(args, &f);
  const VerbError fail{"serve"};
  if (auto rc = parse_verb_args(args, argc, argv, fail)) return *rc;
  if (Status st = check_serve_flags(args, f); !st) return fail(st.message());
  auto lm = load_model(f.model_spec, f.cache, f.chat_template,
                       BackendFlags{f.backend, f.kernel_plan, (int)f.threads, model::SessionOptions{}.max_batch, print_note, {}});
  if (!lm) return fail(lm.message());
  if (f.verbose) std::fputs(runtime::kernel_report(*lm->model).c_str(), stderr);
  if (f.n_ctx > lm->model->config().n_ctx_train)
    return fail("--ctx " + std::to_string(f.n_ctx) + " exceeds the model's training context " +
                std::to_string(lm->model->config().n_ctx_train));
  if (Status st = install_shutdown_signals(); !st) return fail(st.message(), 1);
  ThreadPool pool((int)f.threads);
  auto drafter = mount_serve_drafter(f, *lm, &pool);  // declared before the scheduler: outlives it
  if (!drafter) return fail(drafter.message());
  serve::Metrics metrics;
  auto sched = serve::Scheduler::create(*lm->model, *lm->tok, scheduler_config(f, *drafter), drafter->factory, &pool,
                                        &metrics);
  if (!sched) return fail(sched.message());
  const serve::ServedModel served = served_model(f, *lm, *drafter);
  serve::HttpServer server(http_options(f), served, drafter->info, *lm->tok, **sched, metrics);
  if (Status st = server.bind(); !st) return fail(st.message(), 1);
  const serve::DrafterInfo& di = drafter->info;
  std::fprintf(stderr, "dspark serve: listening on http://%s:%d | model %s (%s) | ctx %lld | %lld slot(s) | drafter %s\n",
               f.host.c_str(), server.port(), served.id.c_str(), lm->path.c_str(), (long long)f.n_ctx,
               (long long)f.parallel,
               di.kind.empty() ? "none" : (di.kind + ", " + std::to_string(di.gamma) + " draft tokens").c_str());
  std::fflush(stderr);
  serve_until_signalled(server, **sched, f.drain_s);
  std::fprintf(stderr, "dspark serve: stopped\n");
  return 0;
}

}  // namespace dspark::tools
