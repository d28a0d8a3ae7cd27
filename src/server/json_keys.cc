#include "server/json_keys.h"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value_stack.hpp>
#include <vector>

namespace caudal::http_api {
namespace {

namespace json = boost::json;

// The parser's handler: builds the value on a value_stack, as json::parse does, and remembers the
// keys of every open object to find the first one repeated.
class Builder {
 public:
  static constexpr size_t max_array_size = json::array::max_size();
  static constexpr size_t max_object_size = json::object::max_size();
  static constexpr size_t max_string_size = json::string::max_size();
  static constexpr size_t max_key_size = json::string::max_size();

  std::optional<std::string>& repeated() { return repeated_; }
  json::value Release() { return stack_.release(); }

  bool on_document_begin(json::error_code&) {
    stack_.reset();
    return true;
  }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) {
    objects_.push_back({.first_key = keys_.size(), .key_count = 0, .array = false, .last_key = {}});
    return true;
  }
  bool on_object_end(size_t n, json::error_code&) {
    keys_.resize(objects_.back().first_key);
    objects_.pop_back();
    stack_.push_object(n);
    return true;
  }
  bool on_array_begin(json::error_code&) {
    objects_.push_back({.first_key = keys_.size(), .key_count = 0, .array = true, .last_key = {}});
    return true;
  }
  bool on_array_end(size_t n, json::error_code&) {
    objects_.pop_back();
    stack_.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    stack_.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    stack_.push_key(s);
    Open& o = objects_.back();
    if (!repeated_ && o.key_count++ < kMaxKeysCompared) {
      bool seen = false;
      for (size_t i = o.first_key; i < keys_.size() && !seen; ++i) seen = keys_[i] == key_;
      if (seen) {
        Repeated();
      } else {
        keys_.push_back(key_);
      }
    }
    o.last_key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_string_part(json::string_view s, size_t, json::error_code&) {
    stack_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, size_t, json::error_code&) {
    stack_.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(int64_t i, json::string_view, json::error_code&) {
    stack_.push_int64(i);
    return true;
  }
  bool on_uint64(uint64_t u, json::string_view, json::error_code&) {
    stack_.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, json::error_code&) {
    stack_.push_double(d);
    return true;
  }
  bool on_bool(bool b, json::error_code&) {
    stack_.push_bool(b);
    return true;
  }
  bool on_null(json::error_code&) {
    stack_.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  struct Open {
    size_t first_key = 0;  // in keys_
    size_t key_count = 0;
    bool array = false;
    std::string last_key;  // the key whose value is being read: names a nested object
  };

  void Repeated() {
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
  }

  json::value_stack stack_;
  std::vector<Open> objects_;      // open objects and arrays, outermost first
  std::vector<std::string> keys_;  // the compared keys of every open object
  std::string key_;                // the key being read
  std::optional<std::string> repeated_;
};

}  // namespace

ParsedJson ParseJson(std::string_view text, size_t max_depth) {
  json::parse_options options;
  options.max_depth = max_depth;
  json::basic_parser<Builder> parser(options);
  ParsedJson out;
  const size_t n = parser.write_some(false, text.data(), text.size(), out.error);
  if (!out.error && n < text.size()) out.error = json::error::extra_data;
  if (out.error) return out;
  out.value = parser.handler().Release();
  out.repeated = std::move(parser.handler().repeated());
  return out;
}

std::optional<std::string> FindRepeatedKey(std::string_view json, size_t max_depth) {
  ParsedJson parsed = ParseJson(json, max_depth);
  if (parsed.error) return std::nullopt;
  return std::move(parsed.repeated);
}

}  // namespace caudal::http_api
