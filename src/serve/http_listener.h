// The HTTP/1.1 server under `dspark serve`: POSIX sockets, one thread per connection, requests
// parsed by http_parse.h. Written here rather than taken from a library because a server that
// holds an expensive generation per request must see its client leave: Debian 12's cpp-httplib
// (0.11) gives a handler no way to notice that the client of a non-streamed request has gone (an
// abandoned request held its slot to the end), answered one of three pipelined requests, and gave
// a client that half-closed after sending an empty reply about half the time.
//
// What it does:
// - keep-alive and pipelining: requests on one connection are answered in order, every one;
// - half-close: a request that arrived complete is answered even if the client then shut down its
//   sending side (shutdown(SHUT_WR));
// - HttpConn::client_gone(): a handler that waits (a non-streamed generation) polls it. A reset is
//   gone at once; an end of stream (which a half-close also sends) is told apart by a one-time
//   "102 Processing" interim response (HTTP/1.1 clients must accept 1xx): a client that closed
//   answers it with a reset;
// - streamed replies in chunked transfer coding; a failed write ends the stream (done(false));
// - limits: head size and header count (431 / 414), body size (413), Expect: 100-continue, idle
//   keep-alive and request timeouts (408), a connection cap (503), all answered with JSON errors;
// - stop(): closes the listener and every connection; run() returns when all threads have left.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <optional>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "serve/http_parse.h"

namespace dspark::serve {

// One client connection, as a handler sees it.
class HttpConn {
 public:
  HttpConn(int fd, int minor) : fd_(fd), minor_(minor) {}
  // True once the client is known to be gone. Cheap (one poll); call it while waiting. With
  // `headers_sent` (a stream), no interim response may be sent: only a reset counts.
  bool client_gone(bool headers_sent = false);

 private:
  friend class HttpListener;
  int fd_;
  int minor_;
  bool eof_ = false;     // the client shut down its sending side (or closed)
  bool probed_ = false;  // the 102 interim response has been sent
  bool gone_ = false;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra header fields
  // Streamed reply (chunked): next() appends the next piece to *out (may add nothing while it
  // waits) and returns false after the last one; done(complete) is called once at the end:
  // complete = false when the client went away or a write failed.
  std::function<bool(std::string* out)> next;
  std::function<void(bool complete)> done;
  // Bytes that may be sent at any point of the stream without changing its meaning (SSE: a
  // comment line). Sent once when the client shuts down its sending side, so that a client that
  // closed answers with a reset even while the stream has nothing to send (a queued request).
  std::string probe;
};

struct HttpListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0 = any free port
  HttpLimits limits;
  int max_connections = 64;     // beyond: 503 and close
  int idle_timeout_s = 5;       // keep-alive connection with no request
  int io_timeout_s = 30;        // a started request that stops arriving (408); a client that stops reading
};

class HttpListener {
 public:
  using Handler = std::function<HttpReply(const HttpRequest& req, HttpConn& conn)>;
  // An HTTP-level failure (malformed request, limits, timeout): the JSON body to send.
  using ErrorBody = std::function<std::string(int status, const std::string& message)>;
  // After each answered request (req = nullptr for a request that could not be parsed).
  using Logger = std::function<void(const HttpRequest* req, int status, size_t body_bytes)>;

  // Asked when a request's head has arrived with `Expect: 100-continue`, before 100 Continue is
  // sent: a reply here is the final answer (the body is never read, the connection closes).
  using HeadCheck = std::function<std::optional<HttpReply>(const HttpRequest& head)>;

  HttpListener(HttpListenerOptions opt, Handler handler, ErrorBody error_body, Logger logger);
  void set_head_check(HeadCheck check) { head_check_ = std::move(check); }  // before run()
  ~HttpListener();

  Status bind();  // errors name host:port
  int port() const { return port_; }
  void run();     // accepts until stop(); returns when every connection thread has finished
  void stop();    // thread-safe, idempotent

 private:
  void serve_connection(int fd);
  bool write_reply(int fd, HttpConn& conn, const HttpRequest* req, HttpReply& reply, bool keep_alive,
                   size_t* body_bytes);
  void leave(int fd);

  HttpListenerOptions opt_;
  Handler handler_;
  ErrorBody error_body_;
  Logger logger_;
  HeadCheck head_check_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // stop() writes a byte to wake the accept loop
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> open_;  // connection fds (guarded by mu_)
  int active_ = 0;      // connection threads running (guarded by mu_)
};

}  // namespace dspark::serve
