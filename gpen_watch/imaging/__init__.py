"""Reading and writing photos: decode with orientation, bit depth, alpha and colour kept, refuse
what is damaged or too large before decoding it, pre-scale, and encode atomically with the
original's metadata (EXIF, ICC, XMP) carried over."""
