#include "server/json_keys.h"

#include <boost/json/basic_parser_impl.hpp>
#include <vector>

namespace caudal::http_api {
namespace {

namespace json = boost::json;

// SAX handler: remembers the keys of every open object and stops at the first repeat.
class KeyTracker {
 public:
  static constexpr size_t max_array_size = static_cast<size_t>(-1);
  static constexpr size_t max_object_size = static_cast<size_t>(-1);
  static constexpr size_t max_string_size = static_cast<size_t>(-1);
  static constexpr size_t max_key_size = static_cast<size_t>(-1);

  const std::optional<std::string>& repeated() const { return repeated_; }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) {
    objects_.push_back({.first_key = keys_.size(), .key_count = 0, .array = false, .last_key = {}});
    return true;
  }
  bool on_object_end(size_t, json::error_code&) {
    keys_.resize(objects_.back().first_key);
    objects_.pop_back();
    return true;
  }
  bool on_array_begin(json::error_code&) {
    objects_.push_back({.first_key = keys_.size(), .key_count = 0, .array = true, .last_key = {}});
    return true;
  }
  bool on_array_end(size_t, json::error_code&) {
    objects_.pop_back();
    return true;
  }
  bool on_key_part(json::string_view s, size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, size_t, json::error_code& ec) {
    key_.append(s.data(), s.size());
    Open& o = objects_.back();
    if (o.key_count++ < kMaxKeysCompared) {
      for (size_t i = o.first_key; i < keys_.size(); ++i) {
        if (keys_[i] == key_) return Repeated(ec);
      }
      keys_.push_back(key_);
    }
    o.last_key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_string_part(json::string_view, size_t, json::error_code&) { return true; }
  bool on_string(json::string_view, size_t, json::error_code&) { return true; }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t, json::string_view, json::error_code&) { return true; }
  bool on_uint64(uint64_t, json::string_view, json::error_code&) { return true; }
  bool on_double(double, json::string_view, json::error_code&) { return true; }
  bool on_bool(bool, json::error_code&) { return true; }
  bool on_null(json::error_code&) { return true; }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  struct Open {
    size_t first_key = 0;  // in keys_
    size_t key_count = 0;
    bool array = false;
    std::string last_key;  // the key whose value is being read: names a nested object
  };

  bool Repeated(json::error_code& ec) {
    std::string path;
    for (size_t i = 0; i + 1 < objects_.size(); ++i) {
      if (objects_[i].array) {
        path += "[]";
        continue;
      }
      if (!path.empty()) path += '.';
      path += objects_[i].last_key;
    }
    if (!path.empty()) path += '.';
    path += key_;
    repeated_ = std::move(path);
    ec = json::error::extra_data;  // any error: it only stops the parser
    return false;
  }

  std::vector<Open> objects_;      // open objects and arrays, outermost first
  std::vector<std::string> keys_;  // the compared keys of every open object
  std::string key_;                // the key being read
  std::optional<std::string> repeated_;
};

}  // namespace

std::optional<std::string> FindRepeatedKey(std::string_view text, size_t max_depth) {
  json::parse_options options;
  options.max_depth = max_depth;
  json::basic_parser<KeyTracker> parser(options);
  json::error_code ec;
  parser.write_some(false, text.data(), text.size(), ec);
  return parser.handler().repeated();
}

}  // namespace caudal::http_api
