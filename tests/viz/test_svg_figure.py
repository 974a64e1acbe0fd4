"""svg_figure, the one renderer of the viz modules' matplotlib charts: the same figure gives the same SVG,
and a chapter's own hash salt (Spark's) changes only the element ids."""
from matplotlib.figure import Figure

from kafka_edu.viz.metrics import SvgFigure, svg_figure
from kafka_edu.viz.spark import SparkFigure, plt


def _chart(fig):
    ax = fig.subplots()
    ax.plot([0, 1, 2], [3, 1, 2], marker="o")       # markers and clipped axes give the SVG hashed ids
    ax.set_title("a chart")
    return fig


def test_same_figure_same_svg_without_date_and_salt_decides_the_ids():
    fig = _chart(Figure(figsize=(3, 2)))
    first = svg_figure(fig, "chart")
    assert isinstance(first, SvgFigure) and first.title == "chart" and repr(first) == "<figure: chart>"
    assert first.svg == svg_figure(fig, "chart").svg == first._repr_svg_()
    assert "<dc:date>" not in first.svg and "Matplotlib" not in first.svg.split("<svg", 1)[0]
    assert first.svg == svg_figure(fig, "chart", hashsalt="kafka-edu").svg
    salted = svg_figure(fig, "chart", hashsalt="kafka-edu-spark").svg
    assert salted != first.svg and len(salted) == len(first.svg)


def test_spark_figure_renders_with_the_spark_salt_and_closes_the_pyplot_figure():
    fig = _chart(plt.figure(figsize=(3, 2)))
    number = fig.number
    figure = SparkFigure(fig, "spark chart")
    assert isinstance(figure, SvgFigure) and figure.title == "spark chart"
    assert not plt.fignum_exists(number)
    assert figure.svg == svg_figure(fig, "spark chart", hashsalt="kafka-edu-spark").svg
