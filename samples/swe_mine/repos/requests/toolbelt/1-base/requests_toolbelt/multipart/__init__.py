from .decoder import MultipartDecoder
from .encoder import encode_with
