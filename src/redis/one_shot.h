// OneShot: a short-lived connection that sends one command and hands back its reply, for the
// questions a store asks about topology (CLUSTER SLOTS of a seed, SENTINEL
// GET-MASTER-ADDR-BY-NAME). It sends AUTH when the URL has credentials, nothing else, and the
// whole exchange (connect, TLS, AUTH, the command) is bounded by one timeout.
//
// Thread-safety: none; io thread only. The object keeps itself alive until it has answered.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "caudal/common/clock.h"
#include "redis/connection.h"
#include "redis/redis_url.h"
#include "redis/store_support.h"

namespace caudal::redis {

class OneShot : public std::enable_shared_from_this<OneShot> {
 public:
  using Done = std::function<void(Result<Reply>)>;

  // `done` runs exactly once, on the io thread: the reply (possibly an error reply), or why there
  // is none (refused, timed out, cancelled).
  static std::shared_ptr<OneShot> Ask(IoRunner& runner, const Clock& clock, const RedisUrl& url,
                                      const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout, Done done);
  // Answers `why` now if not answered yet, and closes.
  void Cancel(const Status& why);

  OneShot(IoRunner& runner, const Clock& clock, const RedisUrl& url, Done done);

 private:
  void Finish(Result<Reply> reply);

  std::shared_ptr<Connection> conn_;
  boost::asio::steady_timer timer_;
  Done done_;
  const std::string where_;  // "redis at host:port"
};

}  // namespace caudal::redis
