#include "serve/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

namespace dspark::serve {

namespace asio = boost::asio;

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kLingerTime = std::chrono::seconds(5);  // lingering close: longest wait for the client's EOF
constexpr size_t kLingerBytes = 16u << 20;             // ... and most input discarded meanwhile
constexpr size_t kReadChunk = 64 * 1024;               // bytes per recv
constexpr int kReadsPerWake = 16;                      // recv calls per connection per loop pass (fairness)
constexpr auto kTick = std::chrono::milliseconds(100);  // how often the loop checks deadlines
constexpr rlim_t kFdReserve = 64;                      // descriptors kept for everything but connections
constexpr int kListenBacklog = 512;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // accept failed (out of descriptors): retry after this
// Input held for requests still arriving, all connections together: past it, connections in the
// middle of a request are not read (TCP holds their clients back; their deadlines still run) while
// new requests (/health) still are. Bounds memory against many concurrent slow uploads.
constexpr size_t kMaxBufferedInput = 256u << 20;

std::string status_line(int minor, int status) {
  return "HTTP/1." + std::to_string(minor) + " " + std::to_string(status) + " " + http_reason(status) + "\r\n";
}

std::string hex(size_t n) {
  char b[20];
  std::snprintf(b, sizeof b, "%zx", n);
  return b;
}

// Blocking send of everything (handler threads; the socket's send timeout bounds a stalled client).
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // reset, closed, or the send timeout (a client that stopped reading)
    }
    data.remove_prefix((size_t)n);
  }
  return true;
}

// Status line and header fields of a reply, up to the empty line.
std::string reply_head(int minor, const HttpReply& reply, bool keep_alive) {
  const bool streamed = (bool)reply.next;
  std::string head = status_line(minor, reply.status);
  head += "Content-Type: " + reply.content_type + "\r\n";
  for (const auto& [k, v] : reply.headers) head += k + ": " + v + "\r\n";
  if (!streamed) head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  else if (minor == 1) head += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive) head += "Connection: close\r\n";
  else if (minor == 0) head += "Connection: keep-alive\r\n";
  return head + "\r\n";
}

// The client's address ("" if unknown): the key of the per-address connection limit.
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, (sockaddr*)&ss, &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = "";
  if (ss.ss_family == AF_INET) ::inet_ntop(AF_INET, &((sockaddr_in*)&ss)->sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6) ::inet_ntop(AF_INET6, &((sockaddr_in6*)&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

// Reads and drops whatever input is already queued on a socket, so that closing it sends a FIN
// after our reply rather than a reset that can destroy the reply before the client reads it.
void discard_queued_input(int fd) {
  char tmp[kReadChunk];
  for (int i = 0; i < kReadsPerWake; ++i)
    if (::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT) <= 0) break;
}

}  // namespace

// A connection while the loop owns it (not while a handler thread has it).
struct HttpListener::Conn {
  explicit Conn(asio::ip::tcp::socket s) : sock(std::move(s)), fd(sock.native_handle()) {}
  asio::ip::tcp::socket sock;
  int fd;
  uint64_t id = 0;
  std::string ip;
  std::string in;   // received bytes not yet consumed by a request
  std::string out;  // bytes queued for the client (written as the socket accepts them)
  bool eof = false;            // the client shut down its sending side
  bool owned = false;          // a handler thread has the connection
  bool sent_continue = false;  // 100 Continue sent for the request now arriving
  bool close_after = false;    // close (lingering) once `out` is written; input is discarded
  bool lingering = false;      // our sending side is shut; discarding input until EOF or the bounds
  size_t discarded = 0;        // input bytes dropped while closing
  bool in_request = false;     // the current request has started arriving
  Clock::time_point request_start;  // its first byte
  Clock::time_point deadline;       // of whatever the connection waits for (see check_deadlines)
  // One readiness wait of each kind at most. A wait started before the connection went to a
  // handler thread is cancelled then; its generation no longer matches when it completes.
  bool read_armed = false, write_armed = false;
  uint64_t read_gen = 0, write_gen = 0;
};

struct HttpListener::Loop {
  asio::io_context ioc{1};
  asio::ip::tcp::acceptor acceptor{ioc};
  asio::steady_timer ticker{ioc};
  asio::steady_timer accept_pause{ioc};
};

bool HttpConn::client_gone(bool headers_sent) {
  if (gone_) return true;
  pollfd p{fd_, POLLRDHUP, 0};  // POLLERR / POLLHUP are always reported
  if (::poll(&p, 1, 0) > 0) {
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return gone_ = true;
    if (p.revents & POLLRDHUP) eof_ = true;
  }
  if (eof_ && !headers_sent) {
    if (minor_ == 0) return gone_ = true;  // no interim responses in HTTP/1.0: an EOF is a goodbye
    if (!probed_) {
      // A client that only half-closed reads this and waits for the final response; one that
      // closed answers with a reset, which the next call sees as POLLERR / POLLHUP.
      probed_ = true;
      static constexpr std::string_view kProbe = "HTTP/1.1 102 Processing\r\n\r\n";
      if (::send(fd_, kProbe.data(), kProbe.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) gone_ = true;
    }
  }
  return gone_;
}

HttpListener::HttpListener(HttpListenerOptions opt, Handler handler, ErrorBody error_body, Logger logger)
    : opt_(std::move(opt)),
      handler_(std::move(handler)),
      error_body_(std::move(error_body)),
      logger_(std::move(logger)),
      loop_(std::make_unique<Loop>()) {}

HttpListener::~HttpListener() {
  stop();
  conns_.clear();  // closes the sockets (run() already did, if it ran)
}

Status HttpListener::bind() {
  const std::string where = opt_.host + ":" + std::to_string(opt_.port);
  boost::system::error_code ec;
  asio::ip::tcp::resolver resolver(loop_->ioc);
  const auto endpoints = resolver.resolve(opt_.host, std::to_string(opt_.port),
                                          asio::ip::resolver_base::passive | asio::ip::resolver_base::numeric_service, ec);
  if (ec) return Status::error("cannot bind " + where + ": " + ec.message());
  std::string why = "no address";
  for (const auto& e : endpoints) {
    auto& a = loop_->acceptor;
    boost::system::error_code err;
    a.open(e.endpoint().protocol(), err);
    if (!err) a.set_option(asio::socket_base::reuse_address(true), err);
    if (!err) a.bind(e.endpoint(), err);
    if (!err) a.listen(kListenBacklog, err);
    if (!err) break;
    why = err.message();
    boost::system::error_code ignored;
    a.close(ignored);
  }
  if (!loop_->acceptor.is_open()) return Status::error("cannot bind " + where + " (" + why + ")");
  ::fcntl(loop_->acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  port_ = loop_->acceptor.local_endpoint(ec).port();
  // Every open connection is a descriptor: raise the soft limit as far as the connection cap needs
  // (and the hard limit allows), else lower the cap to what fits.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t want = (rlim_t)opt_.max_connections + kFdReserve;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
      rlimit raised = rl;
      raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
      if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
      if (rl.rlim_cur < want) {
        opt_.max_connections = (int)std::max<rlim_t>(1, rl.rlim_cur > kFdReserve ? rl.rlim_cur - kFdReserve : 1);
        std::fprintf(stderr, "dspark serve: open-file limit %llu: at most %d connections\n",
                     (unsigned long long)rl.rlim_cur, opt_.max_connections);
      }
    }
  }
  return Status::ok();
}

void HttpListener::stop() {
  if (stopping_.exchange(true)) return;
  loop_->ioc.stop();  // thread-safe; a run() that has not started yet returns at once
}

void HttpListener::run() {
  if (!stopping_) {
    accept_next();
    tick();
    loop_->ioc.run();  // until stop()
  }
  boost::system::error_code ignored;
  loop_->acceptor.close(ignored);
  // Cut the connections handler threads still hold (streams were given their drain time by the
  // caller), wait for the threads, then close everything.
  std::unique_lock lk(mu_);
  for (auto& [id, c] : conns_)
    if (c->owned) ::shutdown(c->fd, SHUT_RDWR);
  cv_.wait(lk, [&] { return handlers_ == 0; });
  lk.unlock();
  conns_.clear();
  per_ip_.clear();
  buffered_ = 0;
}

HttpListener::Conn* HttpListener::find(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second.get();
}

void HttpListener::accept_next() {
  loop_->acceptor.async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket sock) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      if (ec == asio::error::connection_aborted) return accept_next();  // that client only
      // Out of descriptors or memory (or anything else): the listening socket stays readable, so
      // accepting again at once would spin. Pause, then retry.
      loop_->accept_pause.expires_after(kAcceptPause);
      loop_->accept_pause.async_wait([this](const boost::system::error_code& e) {
        if (!e && !stopping_) accept_next();
      });
      return;
    }
    const int fd = sock.native_handle();
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{opt_.io_timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // handler threads' blocking writes
    std::string ip = peer_address(fd);
    if ((int)conns_.size() >= opt_.max_connections) {
      refuse(fd, "too many open connections; retry later");
    } else if (opt_.max_connections_per_ip > 0 && per_ip_[ip] >= opt_.max_connections_per_ip) {
      refuse(fd, "too many open connections from your address; retry later");
    } else {
      ++per_ip_[ip];
      auto c = std::make_unique<Conn>(std::move(sock));
      c->id = next_id_++;
      c->ip = std::move(ip);
      c->deadline = Clock::now() + std::chrono::seconds(opt_.idle_timeout_s);  // idle until its first byte
      Conn& ref = *c;
      conns_.emplace(ref.id, std::move(c));
      arm(ref);
    }
    accept_next();
  });
}

void HttpListener::tick() {
  check_deadlines(Clock::now());
  // A connection left unread while the input of all connections was at its bound reads again now.
  for (auto& [id, c] : conns_) arm(*c);
  loop_->ticker.expires_after(kTick);
  loop_->ticker.async_wait([this](const boost::system::error_code& ec) {
    if (!ec && !stopping_) tick();
  });
}

void HttpListener::arm(Conn& c) {
  if (c.owned) return;
  const uint64_t id = c.id;
  if (!c.out.empty() && !c.write_armed) {
    c.write_armed = true;
    c.sock.async_wait(asio::socket_base::wait_write, [this, id, gen = ++c.write_gen](const boost::system::error_code& ec) {
      Conn* c = find(id);
      if (!c || c->write_gen != gen) return;
      c->write_armed = false;
      if (ec || c->owned) return;
      on_writable(*c);
      if ((c = find(id))) arm(*c);
    });
  }
  const size_t max_buffered = opt_.limits.max_head_bytes + opt_.limits.max_body_bytes;
  const bool room = c.in.empty() || (c.in.size() < max_buffered && buffered_ < kMaxBufferedInput);
  if (!c.eof && (c.lingering || c.close_after || room) && !c.read_armed) {
    c.read_armed = true;
    c.sock.async_wait(asio::socket_base::wait_read, [this, id, gen = ++c.read_gen](const boost::system::error_code& ec) {
      Conn* c = find(id);
      if (!c || c->read_gen != gen) return;
      c->read_armed = false;
      if (ec || c->owned) return;
      on_readable(*c);
      if ((c = find(id))) arm(*c);
    });
  }
}

// Over a connection limit: a best-effort 503 on a socket the loop never keeps (the caller's socket
// object closes it).
void HttpListener::refuse(int fd, const std::string& message) {
  const std::string body = error_body_(503, message);
  const std::string msg = status_line(1, 503) + "Content-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
  discard_queued_input(fd);
  (void)!::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  logger_(nullptr, 503, body.size());
}

void HttpListener::close_now(Conn& c) {
  auto ip = per_ip_.find(c.ip);
  if (ip != per_ip_.end() && --ip->second <= 0) per_ip_.erase(ip);
  buffered_ -= c.in.size();
  conns_.erase(c.id);  // the socket closes; its pending waits complete as aborted and find nothing
}

void HttpListener::consumed(Conn& c, size_t n) {
  c.in.erase(0, n);
  buffered_ -= n;
}

void HttpListener::on_readable(Conn& c) {
  const int fd = c.fd;
  const bool discard = c.lingering || c.close_after;
  char tmp[kReadChunk];
  for (int i = 0; i < kReadsPerWake; ++i) {
    const ssize_t k = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (k > 0) {
      if (!discard) {
        c.in.append(tmp, (size_t)k);
        buffered_ += (size_t)k;
        continue;
      }
      c.discarded += (size_t)k;
      if (c.discarded > kLingerBytes) return close_now(c);
      continue;
    }
    if (k == 0) {
      c.eof = true;
      if (c.lingering) return close_now(c);  // the client has read our reply and closed
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return close_now(c);  // reset
  }
  if (!discard) process(c);
}

void HttpListener::on_writable(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return close_now(c);
    }
    c.out.erase(0, (size_t)n);
    c.deadline = Clock::now() + std::chrono::seconds(opt_.io_timeout_s);  // progress: a fresh write deadline
  }
  if (!c.out.empty()) return;
  if (c.close_after) return start_close(c);
  process(c);
}

void HttpListener::start_close(Conn& c) {
  c.close_after = true;
  if (!c.out.empty()) return;  // on_writable comes back here when the reply is out
  if (c.eof) return close_now(c);  // all input was read: a plain close sends no reset
  ::shutdown(c.fd, SHUT_WR);
  c.lingering = true;
  c.deadline = Clock::now() + kLingerTime;
}

void HttpListener::process(Conn& c) {
  while (!c.owned && !c.close_after && c.out.empty()) {
    const auto now = Clock::now();
    if (c.in.empty()) {
      if (c.eof) return close_now(c);  // nothing (more) to answer
      c.deadline = now + std::chrono::seconds(opt_.idle_timeout_s);  // idle: wait for the next request
      return;
    }
    if (!c.in_request) {
      c.in_request = true;
      c.request_start = now;
    }
    HttpRequest req;
    const ParseResult r = parse_http_request(c.in, opt_.limits, &req);
    if (r.state == ParseState::kIncomplete) {
      auto until = c.request_start + std::chrono::seconds(opt_.head_timeout_s);
      if (r.head_done) {
        const uint64_t length = std::strtoull(std::string(req.header("content-length")).c_str(), nullptr, 10);
        until += std::chrono::milliseconds(1000 * length / (uint64_t)std::max<int64_t>(1, opt_.min_body_rate));
        if (req.expect_continue && !c.sent_continue) {
          if (head_check_) {
            if (std::optional<HttpReply> early = head_check_(req)) {
              queue_reply(c, &req, *early, false);
              logger_(&req, early->status, early->body.size());
              return;
            }
          }
          c.sent_continue = true;
          c.out += "HTTP/1.1 100 Continue\r\n\r\n";
        }
      }
      if (c.eof) return close_now(c);  // the client stopped sending: nothing to answer
      c.deadline = c.out.empty() ? until : std::min(until, now + std::chrono::seconds(opt_.io_timeout_s));
      return;
    }
    if (r.state == ParseState::kError) return queue_error(c, r.status, r.message);
    consumed(c, r.consumed);
    c.in_request = false;
    c.sent_continue = false;
    if (inline_ && inline_(req)) {
      HttpConn conn(c.fd, req.minor);
      HttpReply reply;
      try {
        reply = handler_(req, conn);
      } catch (const std::exception& e) {
        reply.status = 500;
        reply.body = error_body_(500, std::string("internal error: ") + e.what());
      }
      queue_reply(c, &req, reply, req.keep_alive && !stopping_);
      logger_(&req, reply.status, reply.body.size());
      continue;  // the loop ends here while the reply is queued; on_writable resumes it
    }
    return dispatch(c, std::move(req));
  }
}

void HttpListener::queue_reply(Conn& c, const HttpRequest* req, const HttpReply& reply, bool keep_alive) {
  const int minor = req ? req->minor : 1;
  c.out += reply_head(minor, reply, keep_alive);
  if (!(req && req->method == "HEAD")) c.out += reply.body;
  c.deadline = Clock::now() + std::chrono::seconds(opt_.io_timeout_s);
  if (!keep_alive) c.close_after = true;  // the loop writes it when the socket is writable
}

void HttpListener::queue_error(Conn& c, int status, const std::string& message) {
  HttpReply reply;
  reply.status = status;
  reply.body = error_body_(status, message);
  if (status == 408 || status == 503) reply.headers.emplace_back("Retry-After", "1");
  logger_(nullptr, status, reply.body.size());
  queue_reply(c, nullptr, reply, false);
}

void HttpListener::dispatch(Conn& c, HttpRequest req) {
  {
    std::lock_guard lk(mu_);
    if (handlers_ < opt_.max_handlers) {
      ++handlers_;
      c.owned = true;
    }
  }
  if (c.owned) {
    // The handler thread has the socket to itself: no wait of the loop's may still complete on it.
    boost::system::error_code ignored;
    c.sock.cancel(ignored);
    c.read_armed = c.write_armed = false;
    ++c.read_gen;
    ++c.write_gen;
    try {
      std::thread([this, id = c.id, fd = c.fd, eof = c.eof, r = req]() mutable {
        handle_in_thread(id, fd, eof, std::move(r));
      }).detach();
      return;
    } catch (const std::system_error&) {  // no thread to be had (a process or memory limit): busy
      std::lock_guard lk(mu_);
      --handlers_;
      c.owned = false;
    }
  }
  HttpReply reply;
  reply.status = 503;
  reply.body = error_body_(503, "too many requests in progress; retry later");
  reply.headers.emplace_back("Retry-After", "1");
  logger_(&req, 503, reply.body.size());
  queue_reply(c, &req, reply, false);
}

void HttpListener::handle_in_thread(uint64_t id, int fd, bool eof, HttpRequest req) {
  HttpConn conn(fd, req.minor);
  conn.eof_ = eof;
  bool keep = false, ok = false;
  try {  // the connection must come back to the loop whatever happens (stop() waits for it)
    HttpReply reply = handler_(req, conn);
    keep = req.keep_alive && !stopping_ && !conn.gone_;
    size_t bytes = 0;
    ok = !conn.gone_ && write_reply(fd, conn, &req, reply, keep, &bytes);
    logger_(&req, reply.status, bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dspark serve: %s %s: %s\n", req.method.c_str(), req.path.c_str(), e.what());
  }
  std::lock_guard lk(mu_);
  // Under the lock: run() returns (and the listener may be destroyed) only after the last thread
  // has left this block. After stop() the io_context no longer runs what is posted; run() closes.
  asio::post(loop_->ioc, [this, r = Returned{id, keep && ok, conn.gone_ || !ok, conn.eof_}] { on_returned(r); });
  --handlers_;
  cv_.notify_all();
}

void HttpListener::on_returned(const Returned& r) {
  Conn* c = find(r.id);
  if (!c) return;
  c->owned = false;
  c->eof = c->eof || r.eof;
  if (r.gone) return close_now(*c);
  if (!r.keep) start_close(*c);
  else process(*c);  // a pipelined request may be waiting already; else it waits idle
  if ((c = find(r.id))) arm(*c);
}

// What a connection waits for decides what its deadline means: a lingering close or a reply
// being written (close), a request arriving (408), or the next request of an idle keep-alive
// connection (close quietly).
void HttpListener::check_deadlines(Clock::time_point now) {
  std::vector<uint64_t> expired;
  for (auto& [id, c] : conns_)
    if (!c->owned && now >= c->deadline) expired.push_back(id);
  for (uint64_t id : expired) {
    Conn* c = find(id);
    if (!c) continue;
    if (c->lingering || c->close_after || !c->out.empty() || !c->in_request) close_now(*c);
    else queue_error(*c, 408, "the request did not arrive in time");
  }
}

bool HttpListener::write_reply(int fd, HttpConn& conn, const HttpRequest* req, HttpReply& reply, bool keep_alive,
                               size_t* body_bytes) {
  const int minor = req ? req->minor : 1;
  const bool streamed = (bool)reply.next;
  if (streamed && minor == 0) keep_alive = false;  // HTTP/1.0: the body ends with the connection
  const std::string head = reply_head(minor, reply, keep_alive);
  if (!streamed) {
    *body_bytes = reply.body.size();
    if (req && req->method == "HEAD") return send_all(fd, head);
    return send_all(fd, head + reply.body);
  }
  auto finish = [&](bool complete) {
    if (reply.done) reply.done(complete);
    return complete;
  };
  if (!send_all(fd, head)) return finish(false);
  std::string piece;
  for (;;) {
    piece.clear();
    const bool more = reply.next(&piece);
    if (!piece.empty()) {
      *body_bytes += piece.size();
      const std::string framed = minor == 1 ? hex(piece.size()) + "\r\n" + piece + "\r\n" : piece;
      if (!send_all(fd, framed)) return finish(false);
    }
    if (!more) break;
    if (conn.client_gone(true)) return finish(false);
    if (conn.eof_ && !conn.probed_ && !reply.probe.empty()) {
      conn.probed_ = true;
      if (!send_all(fd, minor == 1 ? hex(reply.probe.size()) + "\r\n" + reply.probe + "\r\n" : reply.probe))
        return finish(false);
    }
  }
  if (minor == 1 && !send_all(fd, "0\r\n\r\n")) return finish(false);
  return finish(true);
}

}  // namespace dspark::serve
