// The HTTP front of `dspark serve` (cpp-httplib): OpenAI routes, SSE streaming, API key,
// body limit, JSON errors for every failure, /health, /stats, /metrics and the chat page at /.
// Routes and their bodies: docs/SERVE.md. Request parsing lives in openai_api.h, request ->
// job in prepare.h, generation in scheduler.h; this file only moves bytes between them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "serve/metrics.h"
#include "serve/prepare.h"
#include "serve/scheduler.h"

namespace httplib {
class Server;
}

namespace dspark::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0 = any free port (see HttpServer::port)
  std::string api_key;                // empty: no key needed
  size_t max_body_bytes = 1 << 20;    // larger bodies get 413
  int http_threads = 8;               // connection threads (streams hold one each)
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
             const tokenizer::SpmTokenizer& tok, Scheduler& scheduler, Metrics& metrics);
  ~HttpServer();

  Status bind();          // binds host:port; errors name them
  int port() const { return port_; }
  void run();             // serves until stop()
  void stop();
  // New generations get 503 from now on (shutdown has begun); /health says so.
  void set_draining() { draining_ = true; }

 private:
  void routes();
  HttpOptions opt_;
  ServedModel model_;
  DrafterInfo drafter_;
  const tokenizer::SpmTokenizer& tok_;
  Scheduler& scheduler_;
  Metrics& metrics_;
  std::unique_ptr<httplib::Server> svr_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
  uint64_t id_salt_ = 0;  // random per process: response ids differ across restarts and replicas
  int64_t started_ = 0;
};

}  // namespace dspark::serve
