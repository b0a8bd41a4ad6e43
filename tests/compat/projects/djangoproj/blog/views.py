from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from .models import Post
from .tasks import publish


@csrf_exempt
@require_POST
def create_post(request):
    """Save a post and publish it once the transaction commits (never for a post that was rolled back)."""
    with transaction.atomic():
        post = Post.objects.create(title=request.POST['title'], body=request.POST.get('body', ''))
        publish.delay_on_commit(post.pk)
    return JsonResponse({'id': post.pk}, status=201)
