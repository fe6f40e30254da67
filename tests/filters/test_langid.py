import pickle

import pytest
from datatrove.data import Document

from core.errors import ConfigError
from filters.langid import LangId, LangIdConfig, obtain_lid_model


def test_keeps_configured_languages_with_scores(tmp_path):
    step = LangId(LangIdConfig(languages=["en"], threshold=0.65), obtain_lid_model())
    en = Document(text="Classes provide a means of bundling data and functionality together.", id="en")
    de = Document(text="Klassen bieten eine Möglichkeit, Daten und Funktionalität zu bündeln.", id="de")
    fr = Document(text="Les classes permettent de regrouper des données et des fonctionnalités.", id="fr")
    assert step.filter(en) is True and en.metadata["language"] == "en" and en.metadata["language_score"] > 0.65
    assert step.filter(de) == (False, "language") and de.metadata["language"] == "de"
    assert step.filter(fr) == (False, "language")
    anylang = LangId(LangIdConfig(languages=None), obtain_lid_model())
    assert anylang.filter(Document(text=fr.text, id="fr2")) is True
    again = pickle.loads(pickle.dumps(step))  # workers get the path, not the loaded model
    assert again.filter(Document(text=en.text, id="en2")) is True


def test_missing_model_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="language ID model not found"):
        LangId(LangIdConfig(), tmp_path / "lid.ftz")
