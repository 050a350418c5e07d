// EXIF / XMP orientation parsing against hand-built TIFF blocks: Pillow's reading rules, and malformed blocks that
// must fall back to orientation 1 without reading outside the block.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "media/exif_orientation.h"

using namespace veomni;

namespace {

// One IFD entry as written: tag, type, count and the 4 bytes of its value field (a value or an offset).
struct Entry {
  uint16_t tag, type;
  uint32_t count;
  std::vector<uint8_t> field;  // exactly 4 bytes
};

class Tiff {
 public:
  explicit Tiff(bool big_endian) : big_(big_endian) {}
  std::vector<uint8_t> u16(uint32_t v) const { return bytes(v, 2); }
  std::vector<uint8_t> u32(uint32_t v) const { return bytes(v, 4); }
  // A SHORT value in a value field: the two bytes first, then padding.
  std::vector<uint8_t> short_field(uint32_t v) const {
    std::vector<uint8_t> f = u16(v);
    f.insert(f.end(), {0, 0});
    return f;
  }
  // "Exif\0\0", the header pointing IFD0 at 8, `entries`, next-IFD 0, then `tail` (values stored by offset).
  std::vector<uint8_t> block(const std::vector<Entry>& entries, const std::vector<uint8_t>& tail = {}) const {
    std::vector<uint8_t> out = {'E', 'x', 'i', 'f', 0, 0};
    const std::vector<uint8_t> tiff = tiff_block(entries, tail);
    out.insert(out.end(), tiff.begin(), tiff.end());
    return out;
  }
  std::vector<uint8_t> tiff_block(const std::vector<Entry>& entries, const std::vector<uint8_t>& tail = {}) const {
    std::vector<uint8_t> out = big_ ? std::vector<uint8_t>{'M', 'M', 0, 42} : std::vector<uint8_t>{'I', 'I', 42, 0};
    append(out, u32(8));
    append(out, u16(static_cast<uint32_t>(entries.size())));
    for (const Entry& e : entries) {
      append(out, u16(e.tag));
      append(out, u16(e.type));
      append(out, u32(e.count));
      append(out, e.field);
    }
    append(out, u32(0));
    append(out, tail);
    return out;
  }
  // Where `tail` starts in the TIFF block for `n` entries.
  static uint32_t tail_offset(size_t n) { return static_cast<uint32_t>(8 + 2 + 12 * n + 4); }

 private:
  std::vector<uint8_t> bytes(uint32_t v, int n) const {
    std::vector<uint8_t> out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * (big_ ? n - 1 - i : i))));
    return out;
  }
  static void append(std::vector<uint8_t>& out, const std::vector<uint8_t>& more) {
    out.insert(out.end(), more.begin(), more.end());
  }
  bool big_;
};

constexpr uint16_t kOrientation = 0x0112, kShort = 3, kLong = 4, kRational = 5, kSShort = 8, kFloat = 11,
                   kByte = 1, kAscii = 2, kUndefined = 7;

ExifOrientationTag read_tag(const std::vector<uint8_t>& block) { return read_exif_orientation(block); }

Entry orientation_short(const Tiff& t, uint32_t value) { return {kOrientation, kShort, 1, t.short_field(value)}; }

std::span<const uint8_t> text_span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

TEST(MediaExifOrientation, ReadsEveryOrientationInBothByteOrders) {
  for (bool big : {false, true}) {
    const Tiff t(big);
    for (uint32_t k = 1; k <= 8; ++k) {
      const ExifOrientationTag tag = read_tag(t.block({orientation_short(t, k)}));
      EXPECT_TRUE(tag.readable);
      EXPECT_TRUE(tag.present);
      EXPECT_EQ(tag.orientation, static_cast<int>(k)) << (big ? "MM " : "II ") << k;
    }
  }
}

TEST(MediaExifOrientation, FindsTheTagAmongOthersAndAfterOffsetValues) {
  const Tiff t(true);
  // Make (ASCII, 7 bytes, stored after the directory), Orientation 6, XResolution (RATIONAL by offset).
  const uint32_t tail = Tiff::tail_offset(3);
  std::vector<uint8_t> values = {'C', 'a', 'n', 'o', 'n', 0, 0, 0};
  const std::vector<uint8_t> resolution_num = t.u32(72), resolution_den = t.u32(1);
  values.insert(values.end(), resolution_num.begin(), resolution_num.end());
  values.insert(values.end(), resolution_den.begin(), resolution_den.end());
  const auto block = t.block({{0x010f, kAscii, 7, t.u32(tail)}, orientation_short(t, 6),
                              {0x011a, kRational, 1, t.u32(tail + 8)}},
                             values);
  EXPECT_EQ(read_tag(block).orientation, 6);
}

TEST(MediaExifOrientation, AbsentTagIsNormalButReadable) {
  const Tiff t(false);
  const ExifOrientationTag tag = read_tag(t.block({{0x0128, kShort, 1, t.short_field(2)}}));
  EXPECT_TRUE(tag.readable);
  EXPECT_FALSE(tag.present);
  EXPECT_EQ(tag.orientation, 1);
  const std::vector<uint8_t> prefix_only = {'E', 'x', 'i', 'f', 0, 0};
  EXPECT_TRUE(read_tag(prefix_only).readable);  // Pillow: no EXIF at all
  EXPECT_FALSE(read_tag(prefix_only).present);
}

TEST(MediaExifOrientation, ValuesOutsideTwoToEightMeanNoTurn) {
  const Tiff t(false);
  for (uint32_t v : {0u, 9u, 255u, 65535u}) {
    const ExifOrientationTag tag = read_tag(t.block({orientation_short(t, v)}));
    EXPECT_TRUE(tag.present);
    EXPECT_EQ(tag.orientation, 1) << v;
  }
}

// Pillow compares the tag's first value with the integers 2..8: integer, float and exact rational values count.
TEST(MediaExifOrientation, NumericTypesCountByValue) {
  const Tiff t(false);
  EXPECT_EQ(read_tag(t.block({{kOrientation, kLong, 1, t.u32(6)}})).orientation, 6);
  EXPECT_EQ(read_tag(t.block({{kOrientation, kSShort, 1, t.short_field(8)}})).orientation, 8);
  EXPECT_EQ(read_tag(t.block({{kOrientation, kSShort, 1, t.short_field(0xfffa)}})).orientation, 1);  // -6
  uint32_t six_float;
  const float six = 6.0f;
  std::memcpy(&six_float, &six, 4);
  EXPECT_EQ(read_tag(t.block({{kOrientation, kFloat, 1, t.u32(six_float)}})).orientation, 6);
  const uint32_t tail = Tiff::tail_offset(1);
  auto rational = [&](uint32_t num, uint32_t den) {
    std::vector<uint8_t> v = t.u32(num);
    const std::vector<uint8_t> d = t.u32(den);
    v.insert(v.end(), d.begin(), d.end());
    return read_tag(t.block({{kOrientation, kRational, 1, t.u32(tail)}}, v)).orientation;
  };
  EXPECT_EQ(rational(12, 2), 6);
  EXPECT_EQ(rational(13, 2), 1);
  EXPECT_EQ(rational(6, 0), 1);  // Pillow's x/0 is NaN
}

TEST(MediaExifOrientation, ByteAsciiAndUndefinedNeverEqualAnOrientation) {
  const Tiff t(false);
  for (uint16_t type : {kByte, kAscii, kUndefined}) {
    const ExifOrientationTag tag = read_tag(t.block({{kOrientation, type, 1, {6, 0, 0, 0}}}));
    EXPECT_TRUE(tag.present) << type;  // present: the XMP fallback is not consulted
    EXPECT_EQ(tag.orientation, 1) << type;
  }
}

TEST(MediaExifOrientation, SeveralValuesUseTheFirst) {
  const Tiff t(true);
  std::vector<uint8_t> field = t.u16(3);
  const std::vector<uint8_t> second = t.u16(6);
  field.insert(field.end(), second.begin(), second.end());
  EXPECT_EQ(read_tag(t.block({{kOrientation, kShort, 2, field}})).orientation, 3);
}

TEST(MediaExifOrientation, LaterDuplicateWinsAndEmptyValuesAreSkipped) {
  const Tiff t(false);
  EXPECT_EQ(read_tag(t.block({orientation_short(t, 3), orientation_short(t, 6)})).orientation, 6);
  EXPECT_EQ(read_tag(t.block({orientation_short(t, 3), {kOrientation, kShort, 0, t.short_field(6)}})).orientation, 3);
  EXPECT_FALSE(read_tag(t.block({{kOrientation, kShort, 0, t.short_field(6)}})).present);
}

TEST(MediaExifOrientation, UnknownTypesAreSkipped) {
  const Tiff t(false);
  EXPECT_FALSE(read_tag(t.block({{kOrientation, 14, 1, t.short_field(6)}})).present);
  EXPECT_EQ(read_tag(t.block({{kOrientation, 0, 1, t.short_field(3)}, orientation_short(t, 6)})).orientation, 6);
}

// A value stored past the block's end stops Pillow's directory read: entries before it count, later ones do not.
TEST(MediaExifOrientation, ValueOutsideTheBlockEndsTheDirectory) {
  const Tiff t(false);
  const Entry far_make{0x010f, kAscii, 7, t.u32(0x7ffffff0)};
  EXPECT_FALSE(read_tag(t.block({far_make, orientation_short(t, 6)})).present);
  EXPECT_EQ(read_tag(t.block({orientation_short(t, 6), far_make})).orientation, 6);
  const Entry huge_count{0x010f, kAscii, 0xffffffff, t.u32(Tiff::tail_offset(2))};
  EXPECT_FALSE(read_tag(t.block({huge_count, orientation_short(t, 6)})).present);
  const Entry offset_wraps{0x010f, kRational, 0x20000000, t.u32(0xfffffff8)};  // offset + length past 2^32
  EXPECT_FALSE(read_tag(t.block({offset_wraps, orientation_short(t, 6)})).present);
}

TEST(MediaExifOrientation, TruncatedDirectoryKeepsCompleteEntries) {
  const Tiff t(false);
  std::vector<uint8_t> block = t.block({orientation_short(t, 8), {0x0128, kShort, 1, t.short_field(2)}});
  block.resize(block.size() - 4 - 6);  // next-IFD pointer and half of the second entry gone
  EXPECT_EQ(read_tag(block).orientation, 8);
  block.resize(6 + 8 + 2 + 5);  // the first entry cut too
  EXPECT_FALSE(read_tag(block).present);
  EXPECT_TRUE(read_tag(block).readable);
}

TEST(MediaExifOrientation, DirectoryOutsideTheBlockHasNoTags) {
  const Tiff t(true);
  std::vector<uint8_t> block = t.block({orientation_short(t, 6)});
  for (uint32_t ifd : {0xffffffffu, 0x1000u, static_cast<uint32_t>(block.size() - 6 - 1)}) {
    const std::vector<uint8_t> at = t.u32(ifd);
    std::copy(at.begin(), at.end(), block.begin() + 6 + 4);
    const ExifOrientationTag tag = read_tag(block);
    EXPECT_TRUE(tag.readable) << ifd;
    EXPECT_FALSE(tag.present) << ifd;
  }
}

TEST(MediaExifOrientation, HugeEntryCountStopsAtTheBlockEnd) {
  const Tiff t(false);
  std::vector<uint8_t> block = t.block({orientation_short(t, 5)});
  block[6 + 8] = 0xff, block[6 + 9] = 0xff;  // 65535 entries claimed, one there
  EXPECT_EQ(read_tag(block).orientation, 5);
}

TEST(MediaExifOrientation, HeadersPillowRefusesAreUnreadable) {
  const Tiff t(false);
  const std::vector<uint8_t> good = t.block({orientation_short(t, 6)});
  auto with = [&](std::vector<uint8_t> header) {
    std::vector<uint8_t> block = good;
    std::copy(header.begin(), header.end(), block.begin() + 6);
    return read_tag(block);
  };
  EXPECT_FALSE(with({'X', 'I', 42, 0}).readable);
  EXPECT_FALSE(with({'I', 'M', 42, 0}).readable);
  EXPECT_FALSE(with({'I', 'I', 43, 0}).readable);  // BigTIFF: Pillow's 8-byte header read then fails
  EXPECT_FALSE(with({'I', 'I', 42, 1}).readable);
  EXPECT_EQ(with({'I', 'I', 0, 42}).orientation, 6);  // swapped magic: accepted, order from "II"
  for (size_t keep : {7u, 8u, 10u, 13u}) {  // header cut short
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(keep));
    EXPECT_FALSE(read_tag(cut).readable) << keep;
  }
}

TEST(MediaExifOrientation, RepeatedExifPrefixesAndNoPrefixBothRead) {
  const Tiff t(false);
  std::vector<uint8_t> doubled = {'E', 'x', 'i', 'f', 0, 0};
  const std::vector<uint8_t> block = t.block({orientation_short(t, 7)});
  doubled.insert(doubled.end(), block.begin(), block.end());
  EXPECT_EQ(read_tag(doubled).orientation, 7);
  EXPECT_EQ(read_tag(t.tiff_block({orientation_short(t, 7)})).orientation, 7);  // a PNG eXIf chunk's form
}

// Random damage to a valid block: never a crash or a read outside it (run under ASan/valgrind to see the latter),
// always an orientation in 1..8.
TEST(MediaExifOrientation, DamagedBlocksNeverLeaveTheirBounds) {
  const Tiff t(true);
  const uint32_t tail = Tiff::tail_offset(3);
  const std::vector<uint8_t> good =
      t.block({{0x010f, kAscii, 7, t.u32(tail)}, orientation_short(t, 6), {0x011a, kRational, 1, t.u32(tail + 8)}},
              {'C', 'a', 'n', 'o', 'n', 0, 0, 0, 0, 0, 0, 72, 0, 0, 0, 1});
  std::mt19937 rng(20250101);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> block = good;
    const int flips = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < flips; ++i) block[rng() % block.size()] = static_cast<uint8_t>(rng());
    block.resize(rng() % (block.size() + 1));
    // A fresh heap copy of exactly the kept size, so that an overread lands outside the allocation.
    const std::vector<uint8_t> exact(block.begin(), block.end());
    const ExifOrientationTag tag = read_tag(exact);
    ASSERT_GE(tag.orientation, 1);
    ASSERT_LE(tag.orientation, 8);
  }
}

TEST(MediaXmpOrientation, ReadsAttributeAndElementForms) {
  EXPECT_EQ(xmp_orientation(text_span("<rdf:Description tiff:Orientation=\"6\"/>")), 6);
  EXPECT_EQ(xmp_orientation(text_span("<tiff:Orientation>8</tiff:Orientation>")), 8);
  EXPECT_EQ(xmp_orientation(text_span("tiff:Orientation='6' tiff:Orientation=\"3\"")), 3);  // first match
  EXPECT_EQ(xmp_orientation(text_span("<exif:Orientation>6</exif:Orientation>")), std::nullopt);
  EXPECT_EQ(xmp_orientation(text_span("tiff:Orientation=\"")), std::nullopt);
  EXPECT_EQ(xmp_orientation(text_span("tiff:Orientation>")), std::nullopt);
  EXPECT_EQ(xmp_orientation(text_span("")), std::nullopt);
}

TEST(MediaPictureOrientation, ExifFirstThenXmpAndGarbageIsNormal) {
  const Tiff t(false);
  const std::vector<uint8_t> exif6 = t.block({orientation_short(t, 6)});
  const std::vector<uint8_t> exif_without = t.block({{0x0128, kShort, 1, t.short_field(2)}});
  const std::vector<uint8_t> exif_byte = t.block({{kOrientation, kByte, 1, {6, 0, 0, 0}}});
  std::vector<uint8_t> garbage = exif6;
  garbage[6] = 'Z';
  const std::string xmp8 = "<x tiff:Orientation=\"8\"/>";
  const auto x = std::optional<std::span<const uint8_t>>(text_span(xmp8));
  const auto none = std::optional<std::span<const uint8_t>>();
  auto e = [](const std::vector<uint8_t>& v) { return std::optional<std::span<const uint8_t>>(v); };
  EXPECT_EQ(picture_orientation(none, none), 1);
  EXPECT_EQ(picture_orientation(e(exif6), x), 6);
  EXPECT_EQ(picture_orientation(e(exif_without), x), 8);
  EXPECT_EQ(picture_orientation(none, x), 8);
  EXPECT_EQ(picture_orientation(e(exif_byte), x), 1);  // the tag is there: XMP is not consulted
  EXPECT_EQ(picture_orientation(e(garbage), x), 1);    // Pillow fails on the header and never reaches XMP
  const std::string xmp9 = "tiff:Orientation>9";
  EXPECT_EQ(picture_orientation(none, text_span(xmp9)), 1);
}
