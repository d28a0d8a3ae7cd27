#include "config/config_reference.h"

#include "config/config_tables.h"
#include "config/envoy_yaml_reader.h"

namespace caudal::config_internal {
namespace {

std::string Code(std::string_view s) { return Cat('`', s, '`'); }

// A table cell: one line, no unescaped pipe.
std::string Cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string TypeText(const Shape& s) {
  using Kind = Shape::Kind;
  switch (s.kind) {
    case Kind::kText:
    case Kind::kCustom:
      return s.what.empty() ? "string" : s.what;
    case Kind::kBool:
      return s.what.empty() ? "`true` or `false`" : Cat("`true` or `false` (", s.what, ')');
    case Kind::kInteger:
      return Cat("integer, ", s.min, " to ", s.max);
    case Kind::kDuration:
      if (s.max == 0) return "duration";
      return Cat("duration, ", FormatDuration(Micros(s.min)), " to ",
                 FormatDuration(Micros(s.max)));
    case Kind::kChoice: {
      std::vector<std::string> words;
      for (const std::string& c : s.choices) words.push_back(Code(c));
      return s.what.empty() ? OrList(words) : Cat(OrList(words), " (", s.what, ')');
    }
    case Kind::kList: {
      const std::string of = s.item == nullptr            ? std::string("values")
                             : s.item->kind == Kind::kMap ? std::string("maps (below)")
                                                          : TypeText(*s.item);
      return s.max_items == 0 ? Cat("list of ", of)
                              : Cat("list of ", of, ", at most ", s.max_items);
    }
    case Kind::kMap:
      return "map (below)";
    case Kind::kScalarOrMap:
      return Cat(s.item == nullptr ? std::string("a scalar") : TypeText(*s.item),
                 ", or a map (below)");
  }
  return "";
}

std::string DefaultText(const FieldInfo& f) {
  if (f.required) return "required";
  if (!f.default_note.empty()) return std::string(f.default_note);
  if (!f.default_value.empty()) return Code(f.default_value);
  return "—";
}

class Markdown final : public FieldVisitor {
 public:
  void Section(const std::string& path, std::string_view doc) override {
    text_ += Cat("### ", path.empty() ? std::string("Top level") : Code(path), "\n\n");
    if (!doc.empty()) text_ += Cat(doc, "\n\n");
    text_ += "| field | type | default | what |\n|---|---|---|---|\n";
  }
  void Field(const FieldInfo& f) override {
    std::string what(f.doc);
    if (!f.variant.empty()) what = Cat(what, " (only ", f.variant, ')');
    if (f.extension) what = Cat("caudal's addition: ", what);
    text_ += Cat("| ", Code(f.path), " | ", Cell(TypeText(*f.shape)), " | ", Cell(DefaultText(f)),
                 " | ", Cell(what), " |\n");
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

}  // namespace

std::string RenderReference(const std::function<void(FieldVisitor&)>& walk) {
  Markdown markdown;
  walk(markdown);
  std::string text = markdown.Take();
  // Sections are separated by a blank line; the first table's rows follow its heading.
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 4, "### ") == 0 && i > 0) out += '\n';
    out += text[i];
  }
  return out;
}

std::vector<GeneratedSection> GeneratedSections() {
  return {
      {.name = "config-reference",
       .text = RenderReference([](FieldVisitor& v) { DocumentTable().Visit(v, "", Document{}); })},
      {.name = "envoy-reference", .text = RenderReference([](FieldVisitor& v) {
                                    EnvoyDocumentTable().Visit(v, "", EnvoyDocument{});
                                  })},
  };
}

Result<std::string> ReplaceGenerated(std::string_view doc, std::string_view name,
                                     std::string_view text) {
  const std::string begin = Cat("<!-- ", name, ":begin");
  const std::string end = Cat("<!-- ", name, ":end -->");
  const size_t b = doc.find(begin);
  if (b == std::string_view::npos) return Status::NotFound(Cat("no ", begin, " line"));
  const size_t after_begin = doc.find('\n', b);
  const size_t e = doc.find(end);
  if (after_begin == std::string_view::npos || e == std::string_view::npos || e < after_begin ||
      doc.find(begin, after_begin) != std::string_view::npos) {
    return Status::InvalidArgument(Cat("expected one ", begin, " line, then one ", end, " line"));
  }
  return Cat(doc.substr(0, after_begin + 1), '\n', text, '\n', doc.substr(e));
}

}  // namespace caudal::config_internal
