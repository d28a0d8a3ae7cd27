#include "redis/one_shot.h"

#include "common/cat.h"

namespace caudal::redis {

OneShot::OneShot(IoRunner& runner, const Clock& clock, const RedisUrl& url, Done done)
    : conn_(
          std::make_shared<Connection>(runner.io, url, runner.tls(), clock,
                                       ConnectionSetup{.select_db = false, .load_script = false})),
      timer_(runner.io),
      done_(std::move(done)),
      where_(conn_->Where()) {}

std::shared_ptr<OneShot> OneShot::Ask(IoRunner& runner, const Clock& clock, const RedisUrl& url,
                                      const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout, Done done) {
  auto shot = std::make_shared<OneShot>(runner, clock, url, std::move(done));
  std::string command;
  std::vector<std::string_view> views(argv.begin(), argv.end());
  AppendCommand(views, command);
  shot->timer_.expires_after(timeout);
  shot->timer_.async_wait([shot, timeout](const boost::system::error_code& ec) {
    if (ec) return;
    shot->Finish(
        Status::Unavailable(Cat(shot->where_, " did not answer within ", timeout.count(), "ms")));
  });
  shot->conn_->Start(
      timeout,
      [shot, command](Status st) {
        if (!st.ok() || shot->conn_ == nullptr) {
          shot->Finish(st.ok() ? Status::Unavailable("cancelled") : st);
          return;
        }
        shot->conn_->Send(command, [shot](Result<Reply> r) { shot->Finish(std::move(r)); });
      },
      [](Status) {});
  return shot;
}

void OneShot::Cancel(const Status& why) { Finish(why); }

void OneShot::Finish(Result<Reply> reply) {
  if (!done_) return;
  Done done = std::move(done_);
  done_ = nullptr;
  timer_.cancel();
  // Dropping the connection also drops its callbacks, which hold this object.
  const std::shared_ptr<Connection> conn = std::move(conn_);
  conn->Close(Status::Unavailable("done"));
  done(std::move(reply));
}

}  // namespace caudal::redis
