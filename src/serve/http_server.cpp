#include "serve/http_server.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>

#include "serve/tokenize_api.h"
#include "serve/web_ui.h"

namespace dspark::serve {

using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);
constexpr const char* kJson = "application/json";

HttpReply error_reply(const ApiError& e) {
  HttpReply r;
  r.status = e.status;
  r.body = error_json(e);
  // A busy (429) or draining / overloaded (503) server tells the client when to come back.
  if (e.status == 429 || e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

HttpReply json_reply(const json& j, int status = 200) {
  HttpReply r;
  r.status = status;
  r.body = dump(j);
  return r;
}

// The JSON error of an HTTP-level failure (http_listener.h), with a code per status.
std::string http_error_body(int status, const std::string& message) {
  const char* code = "invalid_http";
  switch (status) {
    case 408: code = "request_timeout"; break;
    case 411: code = "length_required"; break;
    case 413: code = "body_too_large"; break;
    case 414: code = "uri_too_long"; break;
    case 417: code = "expectation_failed"; break;
    case 421: code = "misdirected_request"; break;
    case 431: code = "headers_too_large"; break;
    case 503: code = "too_many_connections"; break;
    case 505: code = "http_version_not_supported"; break;
    default: break;
  }
  return error_json({status, message, status >= 500 ? "server_error" : "invalid_request_error", "", code});
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

std::string route_of(const HttpRequest* req) {
  if (!req) return "other";
  static const char* kKnown[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
                                 "/stats", "/metrics", "/tokenize", "/detokenize", "/"};
  for (const char* r : kKnown)
    if (req->path == r) return r;
  if (req->path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// The methods each route answers ("" = unknown route).
std::string_view methods_of(std::string_view path) {
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/tokenize" || path == "/detokenize")
    return "POST";
  if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0 || path == "/health" || path == "/stats" ||
      path == "/metrics" || path == "/")
    return "GET, HEAD";
  return "";
}

}  // namespace

HttpServer::HttpServer(const HttpOptions& opt, const ServedModel& model, const DrafterInfo& drafter,
                       const tokenizer::Tokenizer& tok, Scheduler& scheduler, Metrics& metrics)
    : opt_(opt), hosts_(opt.host, opt.allowed_hosts), model_(model), drafter_(drafter), tok_(tok), scheduler_(scheduler), metrics_(metrics),
      started_((int64_t)std::time(nullptr)) {
  std::random_device rd;
  id_salt_ = ((uint64_t)rd() << 32) ^ (uint64_t)rd() ^
             (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count();
  HttpListenerOptions lo;
  lo.host = opt_.host;
  lo.port = opt_.port;
  lo.limits.max_body_bytes = opt_.max_body_bytes;
  lo.max_handlers = opt_.http_threads;
  lo.max_connections = opt_.max_connections;
  lo.max_connections_per_ip = opt_.max_connections_per_ip;
  lo.head_timeout_s = opt_.head_timeout_s;
  lo.min_body_rate = opt_.min_body_rate;
  listener_ = std::make_unique<HttpListener>(
      lo, [this](const HttpRequest& req, HttpConn& conn) { return handle(req, conn); }, http_error_body,
      [this](const HttpRequest* req, int status, size_t bytes) {
        metrics_.count_request(route_of(req), status);
        if (opt_.log_requests)
          std::fprintf(stderr, "%s %s %d %zu bytes\n", req ? req->method.c_str() : "-", req ? req->path.c_str() : "-",
                       status, bytes);
      });
  // A client that waits for 100 Continue learns of a missing or wrong key before sending its body.
  listener_->set_head_check([this](const HttpRequest& head) {
    std::optional<HttpReply> r = misdirected(head);
    if (!r) r = unauthorized(head);
    if (r) add_cors(head, &*r);
    return r;
  });
  // /health and /metrics are answered by the listener's event loop itself (they never block), so
  // they answer while every handler thread is busy with a generation.
  listener_->set_inline([](const HttpRequest& req) { return req.path == "/health" || req.path == "/metrics"; });
}

HttpServer::~HttpServer() = default;

Status HttpServer::bind() { return listener_->bind(); }
void HttpServer::run() { listener_->run(); }
void HttpServer::stop() { listener_->stop(); }

bool HttpServer::wait_responses(std::chrono::milliseconds max) const {
  const auto until = std::chrono::steady_clock::now() + max;
  while (open_responses_.load() > 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

json HttpServer::model_entry() const {
  json d = nullptr;
  if (!drafter_.kind.empty())
    d = {{"kind", drafter_.kind}, {"path", public_name(drafter_.path)}, {"num_draft_tokens", drafter_.gamma},
         {"threshold", drafter_.threshold}};
  return json{{"id", model_.id}, {"object", "model"}, {"created", started_}, {"owned_by", "dspark"},
              {"context_length", model_.n_ctx}, {"drafter", d}};
}

HttpReply HttpServer::handle(const HttpRequest& req, HttpConn& conn) {
  HttpReply reply;
  if (std::optional<HttpReply> r = misdirected(req)) {
    reply = std::move(*r);
  } else if (req.method == "OPTIONS" && !opt_.cors_origins.empty() && !methods_of(req.path).empty()) {
    reply.status = 204;  // CORS preflight (no API key: browsers send none with it)
    reply.headers.emplace_back("Access-Control-Allow-Methods", std::string(methods_of(req.path)) + ", OPTIONS");
    reply.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Conversation-Id");
    reply.headers.emplace_back("Access-Control-Max-Age", "600");
  } else {
    reply = route(req, conn);
  }
  add_cors(req, &reply);
  return reply;
}

// Opt-in CORS (--cors-origin): the request's Origin is echoed when it is allowed.
void HttpServer::add_cors(const HttpRequest& req, HttpReply* reply) const {
  if (opt_.cors_origins.empty()) return;
  const std::string origin(req.header("origin"));
  if (origin.empty()) return;
  for (const std::string& o : opt_.cors_origins) {
    if (o == "*" || o == origin) {
      reply->headers.emplace_back("Access-Control-Allow-Origin", o == "*" ? "*" : origin);
      reply->headers.emplace_back("Vary", "Origin");
      return;
    }
  }
}

std::optional<HttpReply> HttpServer::misdirected(const HttpRequest& req) const {
  const std::string_view host = req.header("host");
  if (hosts_.allows(host)) return std::nullopt;
  return error_reply({421, "Host '" + std::string(host.substr(0, 128)) +
                               "' is not served here (only loopback names, the listen address and --allowed-hosts)",
                      "invalid_request_error", "", "misdirected_request"});
}

std::optional<HttpReply> HttpServer::unauthorized(const HttpRequest& req) const {
  const bool open = req.path == "/" || req.path == "/health";
  if (open || authorized(req.header("authorization"), opt_.api_key)) return std::nullopt;
  HttpReply r = error_reply({401, "Incorrect or missing API key: send 'Authorization: Bearer KEY'",
                             "invalid_request_error", "", "invalid_api_key"});
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

HttpReply HttpServer::route(const HttpRequest& req, HttpConn& conn) {
  try {
    const std::string_view allowed = methods_of(req.path);
    if (allowed.empty())
      return error_reply({404, "Unknown route " + req.method + " " + req.path.substr(0, 256) +
                                   " (see GET /v1/models, POST /v1/chat/completions)",
                          "invalid_request_error", "", "unknown_route"});
    const bool method_ok = allowed == "POST" ? req.method == "POST" : req.method == "GET" || req.method == "HEAD";
    if (!method_ok) {
      HttpReply r = error_reply({405, "Method " + req.method.substr(0, 32) + " is not allowed on " + req.path +
                                          " (allowed: " + std::string(allowed) + ")",
                                 "invalid_request_error", "", "method_not_allowed"});
      r.headers.emplace_back("Allow", std::string(allowed));
      return r;
    }
    if (std::optional<HttpReply> r = unauthorized(req)) return std::move(*r);

    if (req.path == "/health")
      return draining_ ? json_reply({{"status", "shutting down"}}, 503) : json_reply({{"status", "ok"}});
    if (req.path == "/v1/models") return json_reply({{"object", "list"}, {"data", json::array({model_entry()})}});
    if (req.path.rfind("/v1/models/", 0) == 0) {
      const std::string id = req.path.substr(std::string("/v1/models/").size());
      if (id == model_.id) return json_reply(model_entry());
      return error_reply(not_found("The model '" + id.substr(0, 256) + "' does not exist", "model_not_found"));
    }
    if (req.path == "/stats") {
      json d = nullptr;
      if (!drafter_.kind.empty())
        d = {{"kind", drafter_.kind}, {"path", public_name(drafter_.path)}, {"num_draft_tokens", drafter_.gamma},
             {"threshold", drafter_.threshold}};
      json st = scheduler_.state();
      json totals = metrics_.totals();
      for (const char* k : {"entries", "bytes", "budget_bytes", "restores", "slot_tokens", "slot_bytes", "save_ms", "restore_ms"})
        totals["prompt_cache"][k] = st["cache"][k];
      return json_reply({{"model", model_.id},
                         {"n_ctx", model_.n_ctx},
                         {"drafter", d},
                         {"uptime_s", (int64_t)std::time(nullptr) - started_},
                         {"totals", totals},
                         {"queue", {{"waiting", st["queue"]}, {"max", st["max_queue"]}}},
                         {"batching", st["batching"]},
                         {"answer_cache", st["answer_cache"]},
                         {"slots", st["slot_state"]}});
    }
    if (req.path == "/metrics") {
      HttpReply r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics_.prometheus(scheduler_.state());
      return r;
    }
    if (req.path == "/") {
      HttpReply r;
      r.content_type = "text/html; charset=utf-8";
      r.body = std::string(kWebUiHtml);
      return r;
    }
    if (req.path == "/tokenize" || req.path == "/detokenize") {
      if (!is_json_content_type(std::string(req.header("content-type"))))
        return error_reply({415, "Content-Type must be application/json", "invalid_request_error", "",
                            "unsupported_media_type"});
      auto r = req.path == "/tokenize" ? tokenize_route(req.body, tok_) : detokenize_route(req.body, tok_);
      if (auto* e = std::get_if<ApiError>(&r)) return error_reply(*e);
      return json_reply(std::get<json>(r));
    }
    return generation(req.path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletion, req, conn);
  } catch (const std::exception& e) {
    return error_reply(server_error(std::string("internal error: ") + e.what()));
  }
}

HttpReply HttpServer::generation(Endpoint ep, const HttpRequest& req, HttpConn& conn) {
  if (!is_json_content_type(std::string(req.header("content-type"))))
    return error_reply({415, "Content-Type must be application/json (got '" +
                                 std::string(req.header("content-type").substr(0, 64)) + "')",
                        "invalid_request_error", "", "unsupported_media_type"});
  auto parsed = parse_request(ep, req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error_reply(*e);
  const GenRequest& r = std::get<GenRequest>(parsed);
  const uint64_t id = mix64(id_salt_ + next_id_++);
  auto prepared = prepare(r, tok_, model_, id);
  if (auto* e = std::get_if<ApiError>(&prepared)) return error_reply(*e);
  Prepared& p = std::get<Prepared>(prepared);
  if (draining_) return error_reply({503, "the server is shutting down", "server_error", "", "shutting_down"});

  auto job = std::make_shared<Job>();
  job->prompt = std::move(p.prompt);
  job->params = std::move(p.params);
  job->use_drafter = p.use_drafter;
  switch (scheduler_.submit(job)) {
    case Scheduler::Submit::kQueueFull:
      return error_reply({429, "Too many requests: every slot is busy and the queue is full; retry later",
                          "rate_limit_error", "", "queue_full"});
    case Scheduler::Submit::kStopping:
      return error_reply({503, "the server is shutting down", "server_error", "", "shutting_down"});
    case Scheduler::Submit::kQueued: break;
  }
  char idbuf[40];
  std::snprintf(idbuf, sizeof idbuf, "%016llx%016llx", (unsigned long long)id, (unsigned long long)mix64(id ^ id_salt_));
  const ResponseMeta meta{std::string(ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + idbuf,
                          (int64_t)std::time(nullptr), model_.id};
  // Counted until the response is written to the end, so a drain can wait for it (wait_responses).
  struct Open {
    std::atomic<int>& n;
    explicit Open(std::atomic<int>& c) : n(c) { ++n; }
    ~Open() { --n; }
  };

  if (!r.stream) {
    Open open(open_responses_);
    std::string ignored;
    while (!job->wait(&ignored, kPoll)) {
      // A client that closed its connection frees the slot before the slot's next step.
      if (conn.client_gone()) job->cancel = true;
    }
    if (job->cancel && conn.client_gone()) return error_reply({499, "client closed the request", "invalid_request_error",
                                                               "", "client_closed"});
    if (!job->error.is_ok() || job->cancelled) return error_reply(job_failure(*job));
    const Usage u = usage_of(*job);
    return json_reply(ep == Endpoint::kChat ? chat_response(meta, job->result.out.text, finish_reason(*job), u)
                                            : completion_response(meta, job->result.out.text, finish_reason(*job), u));
  }

  // Stream: one SSE event per piece of text, then the final chunk (finish reason + timings), the
  // usage chunk when asked (stream_options.include_usage), then [DONE]. A client that goes away
  // (a failed write, a reset) cancels the job, which frees the slot before its next step; a job
  // cancelled by shutdown still ends with its error event and [DONE].
  HttpReply reply;
  reply.content_type = "text/event-stream";
  reply.headers.emplace_back("Cache-Control", "no-cache");
  reply.probe = ": ping\n\n";  // an SSE comment: clients ignore it
  auto open = std::make_shared<Open>(open_responses_);
  auto first = std::make_shared<bool>(true);
  auto ended = std::make_shared<bool>(false);
  reply.next = [job, meta, ep, first, ended, include_usage = r.include_usage](std::string* out) {
    if (*ended) return false;
    std::string text;
    const bool finished = job->wait(&text, kPoll);
    if (!text.empty()) {
      *out += sse_event(ep == Endpoint::kChat ? chat_chunk(meta, text, *first) : completion_chunk(meta, text));
      *first = false;
    }
    if (!finished) return true;
    if (!job->error.is_ok() || job->cancelled) {
      *out += sse_event(error_body(job_failure(*job)));
    } else {
      const Usage u = usage_of(*job);
      *out += sse_event(ep == Endpoint::kChat ? chat_final_chunk(meta, finish_reason(*job), u)
                                              : completion_final_chunk(meta, finish_reason(*job), u));
      if (include_usage) *out += sse_event(usage_chunk(meta, ep == Endpoint::kChat, u));
    }
    *out += std::string(kSseDone);
    *ended = true;
    return false;
  };
  reply.done = [job, open](bool complete) {
    if (!complete) job->cancel = true;
  };
  return reply;
}

}  // namespace dspark::serve
