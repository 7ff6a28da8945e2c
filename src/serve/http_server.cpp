#include "serve/http_server.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>

#include "serve/web_ui.h"

namespace dspark::serve {

using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);
constexpr const char* kJson = "application/json";

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_json(e), kJson);
}

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(dump(j), kJson);
}

const char* finish_reason(const Job& j) {
  // OpenAI has "stop" (a natural end or a stop sequence) and "length".
  return j.result.out.finish == generate::FinishReason::kLength ? "length" : "stop";
}

Usage usage_of(const Job& j) {
  Usage u;
  u.prompt_tokens = (int64_t)j.prompt.size();
  u.completion_tokens = (int64_t)j.result.out.tokens.size();
  u.cached_tokens = j.cached_tokens;
  u.spec = j.spec_ran ? &j.result.stats : nullptr;
  u.prefill_ms = j.result.out.prefill_ms;
  u.decode_ms = j.result.out.decode_ms;
  u.queue_ms = j.queue_ms;
  return u;
}

// A finished job that did not complete: shutdown (503) or an engine failure (500).
ApiError job_failure(const Job& j) {
  if (j.cancelled) return {503, "the server is shutting down; the request was cancelled", "server_error", "", "shutting_down"};
  return server_error("generation failed: " + j.error.message());
}

// splitmix64: spreads a counter into well-mixed 64-bit ids.
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// POST bodies must be declared JSON (parameters such as charset allowed): a form or text/plain
// POST from any web page must not start a generation.
bool is_json_content_type(const std::string& value) {
  std::string media = value.substr(0, value.find(';'));
  while (!media.empty() && std::isspace((unsigned char)media.back())) media.pop_back();
  size_t b = 0;
  while (b < media.size() && std::isspace((unsigned char)media[b])) ++b;
  media = media.substr(b);
  for (char& c : media) c = (char)std::tolower((unsigned char)c);
  return media == "application/json";
}

// Drafter paths are shown by their last component only: no server paths in API responses.
std::string public_name(const std::string& path) {
  return path.empty() ? path : std::filesystem::path(path).lexically_normal().filename().string();
}

std::string route_of(const httplib::Request& req) {
  static const char* kKnown[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
                                 "/stats", "/metrics", "/"};
  for (const char* r : kKnown)
    if (req.path == r) return r;
  if (req.path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

}  // namespace

HttpServer::HttpServer(const HttpOptions& opt, const ServedModel& model, const DrafterInfo& drafter,
                       const tokenizer::SpmTokenizer& tok, Scheduler& scheduler, Metrics& metrics)
    : opt_(opt), model_(model), drafter_(drafter), tok_(tok), scheduler_(scheduler), metrics_(metrics),
      svr_(std::make_unique<httplib::Server>()), started_((int64_t)std::time(nullptr)) {
  std::random_device rd;
  id_salt_ = ((uint64_t)rd() << 32) ^ (uint64_t)rd() ^
             (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  routes();
}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() {
  if (opt_.port == 0) {
    port_ = svr_->bind_to_any_port(opt_.host);
    if (port_ <= 0) return Status::error("cannot bind " + opt_.host + " (any port)");
  } else {
    if (!svr_->bind_to_port(opt_.host, opt_.port))
      return Status::error("cannot bind " + opt_.host + ":" + std::to_string(opt_.port) +
                           " (in use, or not an address of this machine)");
    port_ = opt_.port;
  }
  return Status::ok();
}

void HttpServer::run() { svr_->listen_after_bind(); }
void HttpServer::stop() { svr_->stop(); }

void HttpServer::routes() {
  httplib::Server& s = *svr_;
  const int n_threads = opt_.http_threads;
  s.new_task_queue = [n_threads] { return new httplib::ThreadPool((size_t)n_threads); };
  s.set_payload_max_length(opt_.max_body_bytes);
  // Idle keep-alive connections hold a connection thread; a short timeout lets shutdown finish fast.
  s.set_keep_alive_timeout(1);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool open = req.path == "/" || req.path == "/health";
    if (open || authorized(req.get_header_value("Authorization"), opt_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, {401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'", "invalid_request_error",
                     "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });

  // Any error status without a body (unknown route, body too large, bad request line) gets a JSON error.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e{res.status, "", "invalid_request_error", "", ""};
    if (res.status == 404) {
      e.message = "Unknown route " + req.method + " " + req.path + " (see GET /v1/models, POST /v1/chat/completions)";
      e.code = "unknown_route";
    } else if (res.status == 413) {
      e.message = "The request body is too large";
      e.code = "body_too_large";
    } else {
      e.message = "HTTP error " + std::to_string(res.status);
      if (res.status >= 500) e.type = "server_error";
    }
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, server_error("internal error: " + what));
  });

  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(route_of(req), res.status);
    if (opt_.log_requests)
      std::fprintf(stderr, "%s %s %d %zu bytes\n", req.method.c_str(), req.path.c_str(), res.status, res.body.size());
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) send_json(res, {{"status", "shutting down"}}, 503);
    else send_json(res, {{"status", "ok"}});
  });

  auto model_entry = [this] {
    json d = nullptr;
    if (!drafter_.kind.empty())
      d = {{"kind", drafter_.kind}, {"path", public_name(drafter_.path)}, {"num_draft_tokens", drafter_.gamma},
           {"threshold", drafter_.threshold}};
    return json{{"id", model_.id}, {"object", "model"}, {"created", started_}, {"owned_by", "dspark"},
                {"context_length", model_.n_ctx}, {"drafter", d}};
  };
  s.Get("/v1/models", [model_entry](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"object", "list"}, {"data", json::array({model_entry()})}});
  });
  s.Get(R"(/v1/models/(.+))", [this, model_entry](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id == model_.id) send_json(res, model_entry());
    else send_error(res, not_found("The model '" + id + "' does not exist", "model_not_found"));
  });

  s.Get("/stats", [this](const httplib::Request&, httplib::Response& res) {
    json d = nullptr;
    if (!drafter_.kind.empty())
      d = {{"kind", drafter_.kind}, {"path", public_name(drafter_.path)}, {"num_draft_tokens", drafter_.gamma},
           {"threshold", drafter_.threshold}};
    json st = scheduler_.state();
    json totals = metrics_.totals();
    for (const char* k : {"entries", "bytes", "budget_bytes", "restores", "slot_tokens", "slot_bytes"})
      totals["prompt_cache"][k] = st["cache"][k];
    send_json(res, {{"model", model_.id},
                    {"n_ctx", model_.n_ctx},
                    {"drafter", d},
                    {"uptime_s", (int64_t)std::time(nullptr) - started_},
                    {"totals", totals},
                    {"queue", {{"waiting", st["queue"]}, {"max", st["max_queue"]}}},
                    {"batching", st["batching"]},
                    {"slots", st["slot_state"]}});
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.prometheus(scheduler_.state()), "text/plain; version=0.0.4");
  });

  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(kWebUiHtml), "text/html; charset=utf-8");
  });

  auto generation = [this](Endpoint ep) {
    return [this, ep](const httplib::Request& req, httplib::Response& res) {
      if (!is_json_content_type(req.get_header_value("Content-Type")))
        return send_error(res, {415, "Content-Type must be application/json (got '" +
                                         req.get_header_value("Content-Type").substr(0, 64) + "')",
                                "invalid_request_error", "", "unsupported_media_type"});
      auto parsed = parse_request(ep, req.body);
      if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
      const GenRequest& r = std::get<GenRequest>(parsed);
      const uint64_t id = mix64(id_salt_ + next_id_++);
      auto prepared = prepare(r, tok_, model_, id);
      if (auto* e = std::get_if<ApiError>(&prepared)) return send_error(res, *e);
      Prepared& p = std::get<Prepared>(prepared);
      if (draining_) return send_error(res, {503, "the server is shutting down", "server_error", "", "shutting_down"});

      auto job = std::make_shared<Job>();
      job->prompt = std::move(p.prompt);
      job->params = std::move(p.params);
      job->use_drafter = p.use_drafter;
      switch (scheduler_.submit(job)) {
        case Scheduler::Submit::kQueueFull:
          return send_error(res, {429, "Too many requests: every slot is busy and the queue is full; retry later",
                                  "rate_limit_error", "", "queue_full"});
        case Scheduler::Submit::kStopping:
          return send_error(res, {503, "the server is shutting down", "server_error", "", "shutting_down"});
        case Scheduler::Submit::kQueued: break;
      }
      char idbuf[40];
      std::snprintf(idbuf, sizeof idbuf, "%016llx%016llx", (unsigned long long)id,
                    (unsigned long long)mix64(id ^ id_salt_));
      const ResponseMeta meta{std::string(ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + idbuf,
                              (int64_t)std::time(nullptr), model_.id};

      if (!r.stream) {
        std::string ignored;
        while (!job->wait(&ignored, kPoll)) {
        }
        if (!job->error.is_ok() || job->cancelled) return send_error(res, job_failure(*job));
        const Usage u = usage_of(*job);
        send_json(res, ep == Endpoint::kChat ? chat_response(meta, job->result.out.text, finish_reason(*job), u)
                                             : completion_response(meta, job->result.out.text, finish_reason(*job), u));
        return;
      }

      // Stream: one SSE event per piece of text, then the final chunk (finish reason + timings), the
      // usage chunk when asked (stream_options.include_usage), then
      // [DONE]. A failed write means the client has gone: cancel, which frees the slot before its
      // next step.
      auto first = std::make_shared<bool>(true);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [job, meta, ep, first, include_usage = r.include_usage](size_t, httplib::DataSink& sink) {
            std::string text;
            const bool finished = job->wait(&text, kPoll);
            auto write = [&](const std::string& s) {
              if (!sink.write(s.data(), s.size())) job->cancel = true;
              return !job->cancel;
            };
            if (!text.empty()) {
              const json chunk = ep == Endpoint::kChat ? chat_chunk(meta, text, *first) : completion_chunk(meta, text);
              *first = false;
              if (!write(sse_event(chunk))) return false;
            }
            if (!finished) return sink.is_writable() || (job->cancel = true, false);
            if (!job->error.is_ok() || job->cancelled) {
              if (!write(sse_event(error_body(job_failure(*job))))) return false;
            } else {
              const Usage u = usage_of(*job);
              const json fin = ep == Endpoint::kChat ? chat_final_chunk(meta, finish_reason(*job), u)
                                                     : completion_final_chunk(meta, finish_reason(*job), u);
              if (!write(sse_event(fin))) return false;
              if (include_usage && !write(sse_event(usage_chunk(meta, ep == Endpoint::kChat, u)))) return false;
            }
            if (!write(std::string(kSseDone))) return false;
            sink.done();
            return true;
          },
          [job](bool success) {
            if (!success) job->cancel = true;
          });
    };
  };
  s.Post("/v1/chat/completions", generation(Endpoint::kChat));
  s.Post("/v1/completions", generation(Endpoint::kCompletion));
}

}  // namespace dspark::serve
