// Turning a decoded picture from its stored layout into its displayed one, as Pillow's ImageOps.exif_transpose does.
#pragma once
#include "media/image_rgb.h"

namespace veomni {

// Applies EXIF orientation 1..8 (see exif_orientation.h): 2 mirrors left-right, 3 turns 180 degrees, 4 mirrors
// top-bottom, 5 transposes (swaps rows and columns), 6 turns 90 degrees clockwise, 7 transverses (mirror about the
// anti-diagonal), 8 turns 90 degrees counter-clockwise. 5 to 8 swap height and width. Other values return the
// image unchanged.
RgbImage apply_orientation(RgbImage image, int orientation);

}  // namespace veomni
