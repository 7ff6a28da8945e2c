// The HTTP/1.1 server under `dspark serve`: Boost.Asio's event loop (one io_context thread) owns
// every connection while it is idle or its request is arriving, so an idle or slow client costs a
// socket and a deadline, not a thread; requests are parsed by http_parse.h (Boost.Beast's parser
// plus our checks). A complete request goes to a thread of its own (a generation may block for
// minutes, a stream writes for as long as it runs), and the connection comes back to the loop for
// its next request. The loop waits for readiness (socket::async_wait) and reads and writes the
// socket itself, without blocking, because a connection a handler thread holds must stay a plain
// blocking socket: the handler writes its stream with the socket's send timeout and polls it to
// see its client leave. Debian 12's cpp-httplib (0.11), used before, gives a handler no way to
// notice that the client of a non-streamed request has gone, answered one of three pipelined
// requests, and gave a client that half-closed after sending an empty reply about half the time.
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
// - deadlines, not gaps: the whole request head must arrive within head_timeout_s and the body at
//   min_body_rate (408 otherwise), so a client trickling bytes cannot hold a connection for long;
// - limits: head size and header count (431 / 414), body size (413), Expect: 100-continue, idle
//   keep-alive, requests handled at once, open connections in all and per client address (503),
//   all answered with JSON errors;
// - inline routes (set_inline): cheap requests (/health, /metrics) are answered by the loop itself,
//   so they are answered while every handler thread is busy;
// - lingering close: a connection closed after an error that left request bytes unread (413, 431,
//   ...) first shuts down its sending side and discards input for a bounded time, so the client
//   reads the error instead of a reset;
// - stop(): closes the listener and every connection; run() returns when all threads have left.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
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
  // complete = false when the client went away or a write failed. Not for inline routes.
  std::function<bool(std::string* out)> next;
  std::function<void(bool complete)> done;
  // Bytes that may be sent at any point of the stream without changing its meaning (SSE: a
  // comment line). Sent once when the client shuts down its sending side, so that a client that
  // closed answers with a reset even while the stream has nothing to send (a queued request).
  std::string probe;
};

struct HttpListenerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0 = any free port
  HttpLimits limits;
  int max_handlers = 64;            // requests handled at once (a thread each; a stream holds one); more: 503
  int max_connections = 1024;       // open connections in all; more: 503 and close
  int max_connections_per_ip = 256; // open connections from one client address; more: 503 (0 = no limit)
  int idle_timeout_s = 5;           // keep-alive connection with no request
  int head_timeout_s = 10;          // the whole request head, from its first byte (408)
  int64_t min_body_rate = 16384;    // bytes/s: the body must arrive within head_timeout_s + length / rate (408)
  int io_timeout_s = 30;            // a client that stops reading its response
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
  // True for a request the event loop answers itself (the handler must not block nor stream).
  using InlineRoute = std::function<bool(const HttpRequest& req)>;

  HttpListener(HttpListenerOptions opt, Handler handler, ErrorBody error_body, Logger logger);
  void set_head_check(HeadCheck check) { head_check_ = std::move(check); }  // before run()
  void set_inline(InlineRoute route) { inline_ = std::move(route); }        // before run()
  ~HttpListener();

  Status bind();  // errors name host:port
  int port() const { return port_; }
  void run();     // serves until stop(); returns when every handler thread has finished
  void stop();    // thread-safe, idempotent

 private:
  struct Conn;  // a connection as the loop keeps it (http_listener.cpp)
  struct Loop;  // Asio's io_context, the acceptor and the timer (http_listener.cpp)
  using Clock = std::chrono::steady_clock;
  // A connection a handler thread gives back to the loop.
  struct Returned {
    uint64_t id;
    bool keep;  // answered and kept alive: read its next request
    bool gone;  // the client is gone: close at once
    bool eof;   // the client shut down its sending side
  };

  void accept_next();
  void tick();             // every kTick: deadlines, and connections that may read again
  void arm(Conn& c);       // waits for what the connection can do next (read, write)
  Conn* find(uint64_t id);
  void refuse(int fd, const std::string& message);
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void process(Conn& c);  // parses what has arrived: answers, dispatches or waits
  void dispatch(Conn& c, HttpRequest req);
  void handle_in_thread(uint64_t id, int fd, bool eof, HttpRequest req);
  void on_returned(const Returned& r);
  void queue_reply(Conn& c, const HttpRequest* req, const HttpReply& reply, bool keep_alive);
  void queue_error(Conn& c, int status, const std::string& message);
  void start_close(Conn& c);  // lingering close once the queued bytes are written
  void close_now(Conn& c);
  void consumed(Conn& c, size_t n);  // drops the first n bytes of c.in
  void check_deadlines(Clock::time_point now);
  bool write_reply(int fd, HttpConn& conn, const HttpRequest* req, HttpReply& reply, bool keep_alive,
                   size_t* body_bytes);

  HttpListenerOptions opt_;
  Handler handler_;
  ErrorBody error_body_;
  Logger logger_;
  HeadCheck head_check_;
  InlineRoute inline_;
  std::unique_ptr<Loop> loop_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;  // by id; the loop thread's alone
  std::map<std::string, int> per_ip_;                // open connections by client address (loop thread)
  size_t buffered_ = 0;                              // bytes in every connection's `in` (loop thread)
  std::mutex mu_;
  std::condition_variable cv_;
  int handlers_ = 0;  // handler threads running (guarded by mu_)
};

}  // namespace dspark::serve
