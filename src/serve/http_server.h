// The HTTP front of `dspark serve`: OpenAI routes, SSE streaming, API key, body limit, JSON
// errors for every failure, /health, /stats, /metrics and the chat page at /. Routes and their
// bodies: docs/SERVE.md. Sockets and HTTP framing live in http_listener.h, request parsing in
// openai_api.h, request -> job in prepare.h, generation in scheduler.h; this file only routes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "serve/host_check.h"
#include "serve/http_listener.h"
#include "serve/metrics.h"
#include "serve/prepare.h"
#include "serve/scheduler.h"

namespace dspark::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0 = any free port (see HttpServer::port)
  std::string api_key;                // empty: no key needed
  std::vector<std::string> cors_origins;  // browser origins allowed cross-origin ("*" = any); empty: no CORS
  std::vector<std::string> allowed_hosts;  // Host names answered besides loopback and --host ("*" = any)
  size_t max_body_bytes = 1 << 20;    // larger bodies get 413
  int http_threads = 8;               // requests handled at once (one thread each; streams hold one); more get 503
  int max_connections = 1024;         // open connections in all; more get 503
  int max_connections_per_ip = 256;   // open connections from one client address (0 = no limit)
  int head_timeout_s = 10;            // a request head must arrive whole within this (408)
  int64_t min_body_rate = 16384;      // bytes/s a request body must keep up on average (408)
  bool log_requests = false;          // one line per request on stderr
};

// The drafter mounted in the slots, as /v1/models and /stats describe it.
struct DrafterInfo {
  std::string kind;        // "" = none (--no-spec)
  std::string path;        // checkpoint / GGUF path, "" for ngram
  int gamma = 0;
  double threshold = 0.0;
};

class HttpServer {
 public:
  HttpServer(const HttpOptions& opt, const ServedModel& model, const DrafterInfo& drafter,
             const tokenizer::Tokenizer& tok, Scheduler& scheduler, Metrics& metrics);
  ~HttpServer();

  Status bind();          // binds host:port; errors name them
  int port() const { return listener_->port(); }
  void run();             // serves until stop()
  void stop();
  // New generations get 503 from now on (shutdown has begun); /health says so.
  void set_draining() { draining_ = true; }
  // Waits (up to `max`) until every generation response has been written to the end: streams
  // send their last event, [DONE] and the closing chunk before stop() cuts connections. True if
  // none is left.
  bool wait_responses(std::chrono::milliseconds max) const;

 private:
  HttpReply handle(const HttpRequest& req, HttpConn& conn);
  HttpReply route(const HttpRequest& req, HttpConn& conn);
  // 401 for a route that needs the API key when the request lacks it (nullopt: it may go on).
  std::optional<HttpReply> unauthorized(const HttpRequest& req) const;
  // 421 for a Host the server does not answer (DNS rebinding; host_check.h), else nullopt.
  std::optional<HttpReply> misdirected(const HttpRequest& req) const;
  void add_cors(const HttpRequest& req, HttpReply* reply) const;
  HttpReply generation(Endpoint ep, const HttpRequest& req, HttpConn& conn);
  nlohmann::json model_entry() const;
  HttpOptions opt_;
  HostCheck hosts_;
  ServedModel model_;
  DrafterInfo drafter_;
  const tokenizer::Tokenizer& tok_;
  Scheduler& scheduler_;
  Metrics& metrics_;
  std::unique_ptr<HttpListener> listener_;
  std::atomic<bool> draining_{false};
  std::atomic<int> open_responses_{0};  // generation responses not yet fully written
  std::atomic<uint64_t> next_id_{1};
  uint64_t id_salt_ = 0;  // random per process: response ids differ across restarts and replicas
  int64_t started_ = 0;
};

}  // namespace dspark::serve
